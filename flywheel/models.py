"""The flywheel app keeps only its migrations: its records moved to the lifecycle apps with their tables."""
