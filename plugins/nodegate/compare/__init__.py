"""CI comparison: A/B mode, baselines, regression rules, outliers."""
