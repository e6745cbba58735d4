"""A real Kubernetes control plane for the lab (etcd, kube-apiserver, kube-controller-manager, helm)."""
