"""Small tools every layer uses: the errno table, locks, background tasks, one computation in flight per key, budgets, logs, metrics, the mount table, URL parameters, option values."""
