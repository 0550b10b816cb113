"""`python -m data.inject`: instances made by breaking working code (the bugs themselves: data/bugs/)."""
