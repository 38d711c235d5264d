"""The environment service: Loupe's env kinds leased over HTTP to any RL engine; every episode played is an Episode."""
