"""raybus command executor: applies CommandBatches from NATS to Kubernetes."""
