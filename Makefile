.PHONY: demo test test-unit mutation lab

# Set up everything and run the collection against a simulated Talos cluster.
demo:
	./scripts/demo

# Run the whole test suite (what CI runs).
test:
	./scripts/test

# The inner loop: what needs no lab, fuzz cut short (under two minutes on 2 cores).
test-unit:
	./scripts/test-unit

# Mutation testing of the rule modules (never part of make test: 5-40 minutes on 2 cores).
mutation:
	./scripts/mutation
