"""The running mount: the daemon, its store stack, its control socket and state, readiness notices, and unmounting."""
