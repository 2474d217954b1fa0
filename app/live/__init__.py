"""Live sessions: a teacher's view that every follower's screen shows, in one process or through Redis."""
