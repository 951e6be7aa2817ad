"""The pytest session: plugin wiring, state, items, the engine, interrupts, progress display."""
