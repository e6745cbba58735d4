.PHONY: demo test test-unit lab

# Set up everything and run the collection against a simulated Talos cluster.
demo:
	./scripts/demo

# Run the whole test suite (what CI runs).
test:
	./scripts/test

# The inner loop: what needs no lab, fuzz cut short (under two minutes on 2 cores).
test-unit:
	./scripts/test-unit
