"""lowering: schedules to loop IR, loop passes, the loop-IR interpreter and the backends."""
