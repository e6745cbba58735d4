.PHONY: demo test lab

# Set up everything and run the collection against a simulated Talos cluster.
demo:
	./scripts/demo

# Run the whole test suite (what CI runs).
test:
	./scripts/test
