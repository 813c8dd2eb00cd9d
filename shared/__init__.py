"""The sans-I/O core of kibitz: game rules, the searcher and the protocol schema."""
