"""Values every layer shares: verdicts, thresholds, checks, errors, names, settings, results."""
