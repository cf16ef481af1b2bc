"""`denpex watch`: live logs followed as they grow, and a report each time the answer changes."""
