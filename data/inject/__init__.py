"""Instances made by breaking working code (issue: data without pull requests). `mutations`
holds the rule-based injector's transformations, pure and seeded."""
