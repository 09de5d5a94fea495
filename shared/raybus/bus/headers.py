"""NATS header names raybus sets (trace context uses the W3C names verbatim)."""

MSG_ID = "Nats-Msg-Id"  # JetStream de-duplication within the stream's duplicate window
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
DLQ_ERROR = "Raybus-Dlq-Error"
DLQ_SUBJECT = "Raybus-Dlq-Subject"
