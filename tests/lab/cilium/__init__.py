"""The lab's real Cilium charts (from the Cilium source module) and the fixtures that install them."""
