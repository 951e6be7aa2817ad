"""What a run shows a person: terminal summary, report.html, Allure; one folding module."""
