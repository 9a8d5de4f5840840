"""Validates Kubernetes manifests offline; fails on anything it cannot check.

Usage: validate_manifests.py FILE.yaml...   (multi-document YAML; `helm template` output or plain manifests)

- Built-in kinds (Deployment, Service, HorizontalPodAutoscaler, ...) are checked by kubernetes-validate against its
  bundled OpenAPI schemas of KUBERNETES_VERSION in strict mode: unknown fields are errors.
- KServe kinds (ServingRuntime, InferenceService) are loaded into the kserve SDK's models, field by field down to
  the embedded Kubernetes types (kubernetes client models): an unknown field, a wrong type or a missing required
  field is an error.
- Any other kind is an error too: nothing is skipped silently.

Prints one line per object and ends with 'N passed, N failed'; exits 1 on any failure.
"""

import re
import sys

import kserve.models
import kubernetes.client.models
import kubernetes_validate
import yaml

KUBERNETES_VERSION = "1.37.0"

KSERVE_KINDS = {
    ("serving.kserve.io/v1alpha1", "ServingRuntime"): "V1alpha1ServingRuntime",
    ("serving.kserve.io/v1alpha1", "ClusterServingRuntime"): "V1alpha1ClusterServingRuntime",
    ("serving.kserve.io/v1beta1", "InferenceService"): "V1beta1InferenceService",
}

PRIMITIVES = {
    "str": str,
    "bytes": str,
    "int": int,
    "float": (int, float),
    "bool": bool,
    "object": object,
    # KServe's resource maps: a quantity is written as a string ("2Gi") or a number (2).
    "ResourceQuantity": (str, int, float),
}


class Invalid(Exception):
    pass


def model_class(name):
    for module in (kserve.models, kubernetes.client.models):
        klass = getattr(module, name, None)
        if klass is not None:
            return klass
    raise Invalid(f"no SDK model named {name}")


def load(data, type_name, path):
    """Builds the SDK object for `data` as `type_name`, refusing unknown fields and wrong types."""
    if data is None:
        return None
    # Type names as the generators write them: list[T] / List[T], dict(str, T) / Dict[str, T].
    m = re.fullmatch(r"(?:list|List)\[(.*)\]", type_name)
    if m:
        if not isinstance(data, list):
            raise Invalid(f"{path}: expected a list, got {type(data).__name__}")
        return [load(v, m.group(1), f"{path}[{i}]") for i, v in enumerate(data)]
    m = re.fullmatch(r"(?:dict\(([^,]*), (.*)\)|Dict\[([^,]*), (.*)\])", type_name)
    if m:
        if not isinstance(data, dict):
            raise Invalid(f"{path}: expected a map, got {type(data).__name__}")
        value_type = m.group(2) or m.group(4)
        return {k: load(v, value_type, f"{path}.{k}") for k, v in data.items()}
    if type_name in PRIMITIVES:
        if not isinstance(data, PRIMITIVES[type_name]) or (type_name == "int" and isinstance(data, bool)):
            raise Invalid(f"{path}: expected {type_name}, got {type(data).__name__} {data!r}")
        return data
    if type_name == "datetime":
        return data
    klass = model_class(type_name)
    if not isinstance(data, dict):
        raise Invalid(f"{path}: expected an object ({type_name}), got {type(data).__name__}")
    by_json = {json_name: attr for attr, json_name in klass.attribute_map.items()}
    kwargs = {}
    for key, value in data.items():
        attr = by_json.get(key)
        if attr is None:
            raise Invalid(f"{path}.{key}: unknown field of {type_name}")
        kwargs[attr] = load(value, klass.openapi_types[attr], f"{path}.{key}")
    try:
        return klass(**kwargs)
    except (ValueError, TypeError) as err:
        raise Invalid(f"{path}: {type_name}: {err}") from err


def check(doc):
    """Validates one object; returns how it was checked."""
    key = (doc.get("apiVersion"), doc.get("kind"))
    if key in KSERVE_KINDS:
        load(doc, KSERVE_KINDS[key], doc["kind"])
        return f"kserve {KSERVE_KINDS[key]} model, strict"
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.SchemaNotFoundError as err:
        raise Invalid(f"no bundled schema for {key[1]} ({key[0]}): refusing to skip it") from err
    except kubernetes_validate.ValidationError as err:
        where = ".".join(str(p) for p in err.path) or "(top)"
        raise Invalid(f"{where}: {err.message}") from err
    return f"kubernetes {KUBERNETES_VERSION} schema, strict"


def main(files):
    passed = failed = 0
    for name in files:
        with open(name, encoding="utf-8") as f:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
        if not docs:
            print(f"FAIL {name}: no objects")
            failed += 1
        for doc in docs:
            label = f"{doc.get('kind', '?')} {doc.get('metadata', {}).get('name', '?')} ({name})"
            try:
                how = check(doc)
            except Invalid as err:
                print(f"FAIL {label}: {err}")
                failed += 1
            else:
                print(f"ok   {label}: {how}")
                passed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
