"""tuning_logs."""
