"""schedule.templates."""
