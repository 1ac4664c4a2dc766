"""What the service tells about itself: metrics, traces, log lines."""
