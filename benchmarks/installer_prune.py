"""Benchmark: the installer against kubectl's ApplySet prune, side by side, on the lab API server.

Applies a bundle of 200 objects (ServiceAccounts and ConfigMaps), then a bundle that keeps 100 of
them (prune 100), then reruns that bundle (a no-op), once with the installer (stages.apply_run + stages.prune_run,
as the role does) and once with ``KUBECTL_APPLYSET=true kubectl apply --server-side --prune
--applyset=...`` (the kubectl built for the lab), each in its own namespace. Run by hand:

    ~/.cache/maesh-ichor/env-2.19/bin/python -m benchmarks.installer_prune

The last line is one JSON object: {"benchmark", "figures", "ratio", "goal"}.
"""

import json
import os
import subprocess
import sys
import time

import yaml

from benchmarks import report
from tests import collection_path

collection_path.ensure()

# pylint: disable=wrong-import-position
from ansible_collections.maesh.ichor.plugins.module_utils.installer import live, snapshot, stages  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient  # noqa: E402
from tests.lab.kube.cluster import KubeLab  # noqa: E402


def bundle(directory, ns, count):
    os.makedirs(directory, exist_ok=True)
    objects = []
    for i in range(count):
        if i % 2:
            objects.append({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa-%03d" % i,
                                                                                       "namespace": ns}})
        else:
            objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-%03d" % i,
                                                                                  "namespace": ns},
                            "data": {"i": str(i)}})
    with open(os.path.join(directory, "bundle.yaml"), "w") as handle:
        yaml.safe_dump_all(objects, handle)
    return [directory]


def installer_run(client, paths, ns):
    start = time.perf_counter()
    run_id = snapshot.new_run_id()  # apply and prune of one run share its snapshot's id, as the role passes it
    stages.apply_run(live.Installer(client, paths, namespace=ns, run_id=run_id), False, False)
    stages.prune_run(live.Installer(client, paths, namespace=ns, run_id=run_id), False, False)
    return time.perf_counter() - start


def kubectl_run(lab, paths, ns):
    env = dict(os.environ, KUBECTL_APPLYSET="true", KUBECONFIG=lab.kubeconfig)
    start = time.perf_counter()
    subprocess.run([lab.bins["kubectl"], "apply", "--server-side", "--prune", "-n", ns,
                    "--applyset=configmaps/bench-applyset", "-f", paths[0]],
                   env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main():
    work = report.workdir("ichor-bench-inst-")
    lab = KubeLab.start(workdir=os.path.join(work, "kube"))
    try:
        client = KubeClient(kubeconfig=lab.kubeconfig)
        figures = {}
        for tool in ("installer", "kubectl"):
            ns = lab.new_namespace("bench-" + tool)
            full = bundle(os.path.join(work, tool, "full"), ns, report.size(200, 20))
            half = bundle(os.path.join(work, tool, "half"), ns, report.size(100, 10))
            run = (lambda p, n=ns: installer_run(client, p, n)) if tool == "installer" else \
                (lambda p, n=ns: kubectl_run(lab, p, n))
            figures[tool + "_apply_200_s"] = round(run(full), 3)
            figures[tool + "_prune_100_s"] = round(run(half), 3)
            figures[tool + "_noop_rerun_s"] = round(run(half), 3)
        total = dict((t, figures[t + "_apply_200_s"] + figures[t + "_prune_100_s"]) for t in ("installer", "kubectl"))
        ratio = round(total["installer"] / total["kubectl"], 3)
    finally:
        lab.stop()
    result = {"benchmark": "installer_prune", "figures": figures, "ratio": ratio,
              "goal": "installer apply+prune within 1.2x kubectl applyset; no-op rerun under 2 s"}
    report.write(result)
    for key, value in sorted(figures.items()):
        print("%-26s %s" % (key, value))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
