"""raybus watcher: lists/watches Kubernetes and publishes ObjectEvents + Triggers on NATS."""
