"""What a real kube-apiserver refuses in the objects we write, for the fake API server.

Written from the rules of Kubernetes' validation (pkg/apis/resource/validation/validation.go and
pkg/apis/core/validation of 1.36, the limits in k8s.io/api/resource/v1/types.go); 1.32's
resource.k8s.io/v1beta1 applies the same rules to the fields we write. Where the two releases
differ the stricter one is kept, so that a write passes here only if both would take it:
- a slice holds at most 128 devices (both), 64 once a device uses taints, counters or list
  attributes (1.36; 1.32 has none of those fields);
- a v1beta1 device must carry `basic` (1.32 knows no other kind of device);
- a device has at most 32 attributes and capacities together (both), and at most 48 attribute
  values counting each item of a list attribute (1.36);
- a device's taints (1.33+, validateDeviceTaint): at most 16, each with a key that is a label
  name (a qualified name: `[prefix/]name`), a value that is a label value, an effect of
  NoSchedule, NoExecute or None (1.36 added None; 1.33 to 1.35 take the first two only, which
  is all the driver writes) and a timeAdded that is a time. Where the server does not keep
  taints it drops them before validation (the fake server does that, not this module).

Each validator answers the errors as the apiserver words them (`<path>: <reason>`), none when the
object is valid. Only the fields we write, or that tests write standing in for the scheduler or an
admin, are checked; CEL expressions are checked for length, not compiled.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

JsonObj = Mapping[str, Any]

DNS1123_LABEL_MAX: Final = 63
DNS1123_SUBDOMAIN_MAX: Final = 253
DRIVER_NAME_MAX: Final = 63  # resource.DriverNameMaxLength, also the domain of a qualified name
POOL_NAME_MAX: Final = DNS1123_SUBDOMAIN_MAX
DEVICE_ID_MAX: Final = 32  # DeviceMaxIDLength: the C identifier of an attribute or capacity name
ATTRIBUTE_VALUE_MAX: Final = 64  # DeviceAttributeMaxValueLength
SLICE_MAX_DEVICES: Final = 128  # ResourceSliceMaxDevices
SLICE_MAX_DEVICES_ADVANCED: Final = 64  # ResourceSliceMaxDevicesWithAdvancedFeatures
DEVICE_MAX_ATTRIBUTES_AND_CAPACITIES: Final = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice
DEVICE_MAX_ATTRIBUTE_VALUES: Final = 48  # ResourceSliceMaxAttributeValuesPerDevice
DEVICE_MAX_TAINTS: Final = 16  # DeviceTaintsMaxLength
REQUESTS_MAX: Final = 32  # DeviceRequestsMaxSize
CONSTRAINTS_MAX: Final = 32  # DeviceConstraintsMaxSize
CONFIG_MAX: Final = 32  # DeviceConfigMaxSize
SELECTORS_MAX: Final = 32  # DeviceSelectorsMaxSize
CEL_EXPRESSION_MAX: Final = 10 * 1024  # CELSelectorExpressionMaxLength
ALLOCATION_RESULTS_MAX: Final = 32  # AllocationResultsMaxSize
RESERVED_FOR_MAX: Final = 256  # ResourceClaimReservedForMaxSize
ANNOTATIONS_MAX_BYTES: Final = 256 * 1024  # apimachinery's TotalAnnotationSizeLimitB, keys and values
CONFIGMAP_MAX_BYTES: Final = 1024 * 1024  # corevalidation's MaxConfigMapSize (data and binaryData together)

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(_LABEL)
_DNS1123_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
# semver.org 2.0.0, as the apiserver's version attribute accepts it.
_NUM = r"(0|[1-9][0-9]*)"
_PRE = r"(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)"
_BUILD = r"[0-9a-zA-Z-]+"
_SEMVER = re.compile(rf"{_NUM}\.{_NUM}\.{_NUM}(-{_PRE}(\.{_PRE})*)?(\+{_BUILD}(\.{_BUILD})*)?")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
LABEL_NAME_MAX: Final = 63
TAINT_EFFECTS: Final = ("NoExecute", "NoSchedule", "None")  # validDeviceTaintEffects, sorted as the message lists them
_QUANTITY = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?")

NAME_PART_MSG: Final = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
LABEL_VALUE_MSG: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
    "must start and end with an alphanumeric character"
)
LABEL_MSG: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character"
)
SUBDOMAIN_MSG: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
C_IDENTIFIER_MSG: Final = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string of "
    "alphanumeric characters or '_'"
)


def is_dns1123_label(value: object) -> bool:
    return isinstance(value, str) and len(value) <= DNS1123_LABEL_MAX and _DNS1123_LABEL.fullmatch(value) is not None


def is_dns1123_subdomain(value: object) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= DNS1123_SUBDOMAIN_MAX
        and _DNS1123_SUBDOMAIN.fullmatch(value) is not None
    )


def is_c_identifier(value: object) -> bool:
    return isinstance(value, str) and _C_IDENTIFIER.fullmatch(value) is not None


class _Errors(list[str]):
    def add(self, path: str, message: str) -> None:
        self.append(f"{path}: {message}")

    def invalid(self, path: str, value: object, message: str) -> None:
        self.add(path, f"Invalid value: {_show(value)}: {message}")

    def required(self, path: str, message: str = "") -> None:
        self.add(path, "Required value" + (f": {message}" if message else ""))

    def too_long(self, path: str, limit: int) -> None:
        self.add(path, f"Too long: may not be more than {limit} bytes")

    def too_many(self, path: str, count: int, limit: int) -> None:
        self.add(path, f"Too many: {count}: must have at most {limit} items")


def _show(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _label(errors: _Errors, path: str, value: object) -> None:
    if not value:
        errors.required(path)
    elif not is_dns1123_label(value):
        errors.invalid(path, value, LABEL_MSG)


def _subdomain(errors: _Errors, path: str, value: object, message: str = SUBDOMAIN_MSG) -> None:
    if not value:
        errors.required(path)
    elif not is_dns1123_subdomain(value):
        errors.invalid(path, value, message)


def _driver_name(errors: _Errors, path: str, value: object) -> None:
    """ValidateCSIDriverName: required, at most 63 characters, a DNS subdomain ignoring case."""
    if not isinstance(value, str) or not value:
        errors.required(path)
        return
    if len(value) > DRIVER_NAME_MAX:
        errors.too_long(path, DRIVER_NAME_MAX)
    if not _DNS1123_SUBDOMAIN.fullmatch(value.lower()):
        errors.invalid(path, value, SUBDOMAIN_MSG)


def _pool_name(errors: _Errors, path: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        errors.required(path)
        return
    if len(value) > POOL_NAME_MAX:
        errors.too_long(path, POOL_NAME_MAX)
    for part in value.split("/"):
        if not _DNS1123_SUBDOMAIN.fullmatch(part):
            errors.invalid(path, part, SUBDOMAIN_MSG)


def _c_identifier(errors: _Errors, path: str, value: str) -> None:
    if len(value) > DEVICE_ID_MAX:
        errors.too_long(path, DEVICE_ID_MAX)
    if not is_c_identifier(value):
        errors.invalid(path, value, C_IDENTIFIER_MSG)


def _qualified_name(errors: _Errors, path: str, name: str) -> None:
    """An attribute or capacity name: a C identifier, optionally `<domain>/` first."""
    parts = name.split("/")
    if len(parts) == 1:
        _c_identifier(errors, path, name)
        return
    domain, ident = parts[0], parts[1]
    if not domain:
        errors.invalid(path, "", "the domain must not be empty")
    else:
        _driver_name(errors, path, domain)
    if not ident:
        errors.invalid(path, "", "the name must not be empty")
    else:
        _c_identifier(errors, path, ident)


def _fully_qualified_name(errors: _Errors, path: str, name: object) -> None:
    if not isinstance(name, str) or "/" not in name:
        errors.invalid(path, name, "a fully qualified name must be a domain and a name separated by a slash")
        return
    _qualified_name(errors, path, name)


def _list(errors: _Errors, path: str, value: object, limit: int) -> list[Any] | None:
    """The list at `path`, None (with the error) when it is too long or no list: the apiserver
    stops there rather than look at every item of an oversized list."""
    if value is None:
        return []
    if not isinstance(value, list):
        errors.invalid(path, value, "must be a list")
        return None
    if limit >= 0 and len(value) > limit:
        errors.too_many(path, len(value), limit)
        return None
    return value


def _unique(errors: _Errors, path: str, keys: Sequence[object]) -> None:
    seen: set[object] = set()
    for i, key in enumerate(keys):
        if key in seen:
            errors.add(f"{path}[{i}]", f"Duplicate value: {_show(key)}")
        seen.add(key)


# ---- ResourceSlice --------------------------------------------------------------------------------

_SCALAR_ATTRIBUTES: Final = ("bool", "int", "string", "version")
_LIST_ATTRIBUTES: Final = ("bools", "ints", "strings", "versions")


def _attribute(errors: _Errors, path: str, attribute: object) -> None:
    if not isinstance(attribute, Mapping):
        errors.invalid(path, attribute, "exactly one value must be specified")
        return
    present = [k for k in (*_SCALAR_ATTRIBUTES, *_LIST_ATTRIBUTES) if attribute.get(k) is not None]
    for key in present:
        value = attribute[key]
        values = value if key in _LIST_ATTRIBUTES else [value]
        if key in _LIST_ATTRIBUTES and not values:
            errors.invalid(f"{path}.{key}", value, "must not be empty if specified")
        for i, item in enumerate(values):
            item_path = f"{path}.{key}[{i}]" if key in _LIST_ATTRIBUTES else f"{path}.{key}"
            if key in ("version", "versions") and not (isinstance(item, str) and _SEMVER.fullmatch(item)):
                errors.invalid(item_path, item, "must be a string compatible with semver.org spec 2.0.0")
            if (
                key not in ("bool", "bools", "int", "ints")
                and isinstance(item, str)
                and len(item) > ATTRIBUTE_VALUE_MAX
            ):
                errors.too_long(item_path, ATTRIBUTE_VALUE_MAX)
    if len(present) != 1:
        errors.invalid(path, "" if not present else dict(attribute), "exactly one value must be specified")


def _attribute_values(attributes: Mapping[str, Any]) -> int:
    count = 0
    for attribute in attributes.values():
        lists = [attribute.get(k) for k in _LIST_ATTRIBUTES] if isinstance(attribute, Mapping) else []
        items = sum(len(v) for v in lists if isinstance(v, list))
        count += items if items else 1
    return count


def _uses_advanced_features(device: Mapping[str, Any]) -> bool:
    attributes = device.get("attributes") or {}
    lists = any(isinstance(a, Mapping) and any(a.get(k) for k in _LIST_ATTRIBUTES) for a in attributes.values())
    return bool(device.get("taints") or device.get("consumesCounters") or lists)


def _device_fields(device: Mapping[str, Any], version: str) -> Mapping[str, Any]:
    basic = device.get("basic")
    return basic if version == "v1beta1" and isinstance(basic, Mapping) else device


def _device(errors: _Errors, path: str, device: object, version: str) -> None:
    if not isinstance(device, Mapping):
        errors.invalid(path, device, "must be an object")
        return
    _label(errors, f"{path}.name", device.get("name"))
    if version == "v1beta1" and not isinstance(device.get("basic"), Mapping):
        errors.required(f"{path}.basic")
        return
    fields = _device_fields(device, version)
    inner = f"{path}.basic" if version == "v1beta1" else path
    attributes = fields.get("attributes") or {}
    capacity = fields.get("capacity") or {}
    if not isinstance(attributes, Mapping) or not isinstance(capacity, Mapping):
        errors.invalid(inner, fields, "attributes and capacity must be maps")
        return
    total = len(attributes) + len(capacity)
    if total > DEVICE_MAX_ATTRIBUTES_AND_CAPACITIES:
        errors.invalid(
            inner, total,
            f"the total number of attributes and capacities must not exceed {DEVICE_MAX_ATTRIBUTES_AND_CAPACITIES}",
        )  # fmt: skip
    values = _attribute_values(attributes)
    if values > DEVICE_MAX_ATTRIBUTE_VALUES:
        errors.invalid(
            inner, values, f"the total number of attribute values must not exceed {DEVICE_MAX_ATTRIBUTE_VALUES}"
        )
    for name, attribute in attributes.items():
        _qualified_name(errors, f"{inner}.attributes", name)
        _attribute(errors, f"{inner}.attributes[{name}]", attribute)
    for name, cap in capacity.items():
        _qualified_name(errors, f"{inner}.capacity", name)
        value = cap.get("value") if isinstance(cap, Mapping) else None
        if not (isinstance(value, str) and _QUANTITY.fullmatch(value)) and not isinstance(value, int):
            errors.invalid(f"{inner}.capacity[{name}].value", value, "quantities must match the regular expression")
        policy = cap.get("requestPolicy") if isinstance(cap, Mapping) else None
        if policy is not None and not fields.get("allowMultipleAllocations"):
            errors.add(f"{inner}.capacity[{name}].requestPolicy", "Forbidden: allowMultipleAllocations must be true")
    for i, taint in enumerate(_list(errors, f"{inner}.taints", fields.get("taints"), DEVICE_MAX_TAINTS) or []):
        _taint(errors, f"{inner}.taints[{i}]", taint)


def _label_name(errors: _Errors, path: str, key: object) -> None:
    """metav1validation.ValidateLabelName: IsQualifiedName (`[DNS subdomain prefix/]name`, name at most 63)."""
    if not isinstance(key, str) or not key:
        errors.required(path)
        return
    if key.count("/") > 1:
        errors.invalid(path, key, "a qualified name must consist of a name with an optional prefix and one '/'")
        return
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or not is_dns1123_subdomain(prefix)):
        errors.invalid(path, key, "prefix part " + SUBDOMAIN_MSG)
    if not name:
        errors.invalid(path, key, "name part must be non-empty")
    elif len(name) > LABEL_NAME_MAX:
        errors.invalid(path, key, f"name part must be no more than {LABEL_NAME_MAX} characters")
    elif not _LABEL_NAME.fullmatch(name):
        errors.invalid(path, key, NAME_PART_MSG)


def _label_value(errors: _Errors, path: str, value: object) -> None:
    if not isinstance(value, str):
        errors.invalid(path, value, "must be a string")
    elif len(value) > LABEL_NAME_MAX:
        errors.invalid(path, value, f"must be no more than {LABEL_NAME_MAX} characters")
    elif value and not _LABEL_NAME.fullmatch(value):
        errors.invalid(path, value, LABEL_VALUE_MSG)


def _taint(errors: _Errors, path: str, taint: object) -> None:
    if not isinstance(taint, Mapping):
        errors.invalid(path, taint, "must be an object")
        return
    _label_name(errors, f"{path}.key", taint.get("key"))
    if taint.get("value"):
        _label_value(errors, f"{path}.value", taint.get("value"))
    effect = taint.get("effect")
    if not effect:
        errors.required(f"{path}.effect")
    elif effect not in TAINT_EFFECTS:
        supported = ", ".join(f'"{e}"' for e in TAINT_EFFECTS)
        errors.add(f"{path}.effect", f"Unsupported value: {_show(effect)}: supported values: {supported}")
    added = taint.get("timeAdded")
    if added is not None and not (isinstance(added, str) and _RFC3339.fullmatch(added)):
        errors.invalid(f"{path}.timeAdded", added, "must be an RFC 3339 time")


def _at(spec: Mapping[str, Any], path: str) -> object:
    value: object = spec
    for key in path.split(".")[1:]:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def validate_resource_slice(obj: JsonObj, old: JsonObj | None = None) -> list[str]:
    """ValidateResourceSlice / ValidateResourceSliceUpdate for the spec (metadata.name is the fake's)."""
    errors = _Errors()
    version = str(obj.get("apiVersion", "")).rpartition("/")[2]
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        errors.required("spec")
        return errors
    _driver_name(errors, "spec.driver", spec.get("driver"))
    pool = spec.get("pool")
    if not isinstance(pool, Mapping):
        errors.required("spec.pool.name")
    else:
        _pool_name(errors, "spec.pool.name", pool.get("name"))
        count, generation = pool.get("resourceSliceCount", 0), pool.get("generation", 0)
        if not isinstance(count, int) or count <= 0:
            errors.invalid("spec.pool.resourceSliceCount", count, "must be greater than zero")
        if not isinstance(generation, int) or generation < 0:
            errors.invalid("spec.pool.generation", generation, "must be greater than or equal to zero")
    if old is not None:
        old_spec = old.get("spec") or {}
        for path in ("spec.pool.name", "spec.driver", "spec.nodeName"):
            now, before = _at(spec, path), _at(old_spec, path)
            if now != before:
                errors.invalid(path, now, "field is immutable")
    _node_selection(errors, spec)
    if spec.get("sharedCounters") is not None and spec.get("devices") is not None:
        errors.invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed")
    raw_devices = spec.get("devices")
    advanced = isinstance(raw_devices, list) and any(
        isinstance(d, Mapping) and _uses_advanced_features(_device_fields(d, version)) for d in raw_devices
    )
    devices = _list(errors, "spec.devices", raw_devices, SLICE_MAX_DEVICES_ADVANCED if advanced else SLICE_MAX_DEVICES)
    if devices:
        for i, device in enumerate(devices):
            _device(errors, f"spec.devices[{i}]", device, version)
        _unique(errors, "spec.devices", [d.get("name") if isinstance(d, Mapping) else None for d in devices])
    return errors


def _node_selection(errors: _Errors, spec: Mapping[str, Any]) -> None:
    chosen: list[str] = []
    node = spec.get("nodeName")
    if node is not None:
        if node == "":
            errors.invalid("spec.nodeName", node, "must be either unset or set to a non-empty string")
        else:
            chosen.append("`nodeName`")
            _subdomain(errors, "spec.nodeName", node)
    if spec.get("nodeSelector") is not None:
        chosen.append("`nodeSelector`")
        terms = (spec["nodeSelector"] or {}).get("nodeSelectorTerms") or []
        if len(terms) != 1:
            errors.invalid("spec.nodeSelector.nodeSelectorTerms", terms, "must have exactly one node selector term")
    for flag in ("allNodes", "perDeviceNodeSelection"):
        if spec.get(flag) is not None:
            if spec[flag] is True:
                chosen.append(f"`{flag}`")
            else:
                errors.invalid(f"spec.{flag}", spec[flag], "must be either unset or set to true")
    one_of = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
    if not chosen:
        errors.required("spec", one_of)
    elif len(chosen) > 1:
        errors.invalid("spec", "{" + ", ".join(chosen) + "}", f"{one_of}, but multiple fields are set")


# ---- DeviceClass and the parts of a claim it shares -----------------------------------------------


def _selectors(errors: _Errors, path: str, selectors: object) -> None:
    items = _list(errors, path, selectors, SELECTORS_MAX)
    for i, selector in enumerate(items or []):
        cel = selector.get("cel") if isinstance(selector, Mapping) else None
        if not isinstance(cel, Mapping):
            errors.required(f"{path}[{i}].cel")
            continue
        expression = cel.get("expression")
        if not isinstance(expression, str) or not expression:
            errors.required(f"{path}[{i}].cel.expression")
        elif len(expression) > CEL_EXPRESSION_MAX:
            errors.too_long(f"{path}[{i}].cel.expression", CEL_EXPRESSION_MAX)


def _opaque_configs(errors: _Errors, path: str, configs: object, limit: int) -> None:
    for i, config in enumerate(_list(errors, path, configs, limit) or []):
        opaque = config.get("opaque") if isinstance(config, Mapping) else None
        if not isinstance(opaque, Mapping):
            errors.required(f"{path}[{i}].opaque")
            continue
        _driver_name(errors, f"{path}[{i}].opaque.driver", opaque.get("driver"))
        if not isinstance(opaque.get("parameters"), Mapping):
            errors.invalid(f"{path}[{i}].opaque.parameters", "<value omitted>", "must be a valid JSON object")


def validate_device_class(obj: JsonObj, old: JsonObj | None = None) -> list[str]:
    """ValidateDeviceClass: the spec's selectors and config (the name is a DNS subdomain, checked by the fake)."""
    errors = _Errors()
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        errors.invalid("spec", spec, "must be an object")
        return errors
    _selectors(errors, "spec.selectors", spec.get("selectors"))
    _opaque_configs(errors, "spec.config", spec.get("config"), CONFIG_MAX)
    return errors


# ---- ResourceClaim --------------------------------------------------------------------------------


def _request_names(spec: Mapping[str, Any]) -> set[str]:
    """The names a result or constraint may refer to: each request, and `<request>/<subrequest>`."""
    names: set[str] = set()
    for request in (spec.get("devices") or {}).get("requests") or []:
        if not isinstance(request, Mapping):
            continue
        name = str(request.get("name", ""))
        names.add(name)
        for sub in request.get("firstAvailable") or []:
            if isinstance(sub, Mapping):
                names.add(f"{name}/{sub.get('name', '')}")
    return names


def _request_ref(errors: _Errors, path: str, name: object, known: set[str]) -> None:
    ref_msg = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
    segments = name.split("/") if isinstance(name, str) else [name]
    if len(segments) > 2:
        errors.invalid(path, name, ref_msg)
        return
    for segment in segments:
        _label(errors, path, segment)
    if name not in known:
        errors.invalid(path, name, ref_msg)


def _exact_request(errors: _Errors, path: str, request: Mapping[str, Any]) -> None:
    _subdomain(errors, f"{path}.deviceClassName", request.get("deviceClassName"))
    _selectors(errors, f"{path}.selectors", request.get("selectors"))
    mode, count = request.get("allocationMode") or "ExactCount", request.get("count")
    if mode == "All" and count not in (None, 0):
        errors.invalid(f"{path}.count", count, "must not be specified when allocationMode is 'All'")
    elif mode == "ExactCount" and count is not None and (not isinstance(count, int) or count <= 0):
        errors.invalid(f"{path}.count", count, "must be greater than zero")
    elif mode not in ("All", "ExactCount"):
        errors.add(f"{path}.allocationMode", f'Unsupported value: "{mode}": supported values: "All", "ExactCount"')


def _request(errors: _Errors, path: str, request: object, version: str) -> None:
    if not isinstance(request, Mapping):
        errors.invalid(path, request, "must be an object")
        return
    _label(errors, f"{path}.name", request.get("name"))
    subs = request.get("firstAvailable")
    if version == "v1":
        exactly = request.get("exactly")
        if (exactly is None) == (subs is None):
            errors.required(path, "exactly one of `exactly` or `firstAvailable` is required")
        elif isinstance(exactly, Mapping):
            _exact_request(errors, f"{path}.exactly", exactly)
    elif subs is None:
        # v1beta1 keeps the exact request's fields on the request itself.
        _exact_request(errors, path, request)
    for j, sub in enumerate(_list(errors, f"{path}.firstAvailable", subs, 8) or []):
        if isinstance(sub, Mapping):
            _label(errors, f"{path}.firstAvailable[{j}].name", sub.get("name"))
            _exact_request(errors, f"{path}.firstAvailable[{j}]", sub)


_MATCH_OR_DISTINCT: Final = '"matchAttribute" or "distinctAttribute"'


def _claim_spec(errors: _Errors, spec: Mapping[str, Any], version: str) -> None:
    devices = spec.get("devices") or {}
    known = _request_names(spec)
    requests = _list(errors, "spec.devices.requests", devices.get("requests"), REQUESTS_MAX)
    for i, request in enumerate(requests or []):
        _request(errors, f"spec.devices.requests[{i}]", request, version)
    if requests:
        _unique(errors, "spec.devices.requests", [r.get("name") if isinstance(r, Mapping) else None for r in requests])
    constraints = _list(errors, "spec.devices.constraints", devices.get("constraints"), CONSTRAINTS_MAX)
    for i, constraint in enumerate(constraints or []):
        path = f"spec.devices.constraints[{i}]"
        if not isinstance(constraint, Mapping):
            errors.invalid(path, constraint, "must be an object")
            continue
        for j, name in enumerate(_list(errors, f"{path}.requests", constraint.get("requests"), REQUESTS_MAX) or []):
            _request_ref(errors, f"{path}.requests[{j}]", name, known)
        match, distinct = constraint.get("matchAttribute"), constraint.get("distinctAttribute")
        if match is not None and distinct is not None:
            errors.required(path, f"exactly one of {_MATCH_OR_DISTINCT} is required, but multiple fields are set")
        elif match is None and distinct is None:
            errors.required(f"{path}.matchAttribute")
        else:
            _fully_qualified_name(errors, f"{path}.{'matchAttribute' if match is not None else 'distinctAttribute'}",
                                  match if match is not None else distinct)  # fmt: skip
    _opaque_configs(errors, "spec.devices.config", devices.get("config"), CONFIG_MAX)


def _allocation(errors: _Errors, allocation: Mapping[str, Any], known: set[str]) -> None:
    devices = allocation.get("devices") or {}
    path = "status.allocation.devices.results"
    for i, result in enumerate(_list(errors, path, devices.get("results"), ALLOCATION_RESULTS_MAX) or []):
        if not isinstance(result, Mapping):
            errors.invalid(f"{path}[{i}]", result, "must be an object")
            continue
        _request_ref(errors, f"{path}[{i}].request", result.get("request"), known)
        _driver_name(errors, f"{path}[{i}].driver", result.get("driver"))
        _pool_name(errors, f"{path}[{i}].pool", result.get("pool"))
        _label(errors, f"{path}[{i}].device", result.get("device"))


def validate_resource_claim(obj: JsonObj, old: JsonObj | None = None) -> list[str]:
    """ValidateResourceClaim and its status update: the spec (immutable once written), the
    allocation (immutable once set) and reservedFor."""
    errors = _Errors()
    version = str(obj.get("apiVersion", "")).rpartition("/")[2]
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        errors.required("spec")
        return errors
    if old is not None and spec != old.get("spec"):
        errors.invalid("spec", "<value omitted>", "field is immutable")
    elif old is None:
        _claim_spec(errors, spec, version)
    status = obj.get("status") or {}
    allocation = status.get("allocation")
    old_allocation = ((old or {}).get("status") or {}).get("allocation")
    if allocation is not None and old_allocation is not None:
        if allocation != old_allocation:
            errors.invalid("status.allocation", "<value omitted>", "field is immutable")
    elif isinstance(allocation, Mapping):
        _allocation(errors, allocation, _request_names(spec))
    reserved = _list(errors, "status.reservedFor", status.get("reservedFor"), RESERVED_FOR_MAX)
    for i, ref in enumerate(reserved or []):
        for key in ("resource", "name", "uid"):
            if not (isinstance(ref, Mapping) and ref.get(key)):
                errors.required(f"status.reservedFor[{i}].{key}")
    if reserved:
        _unique(errors, "status.reservedFor", [r.get("uid") if isinstance(r, Mapping) else None for r in reserved])
        if allocation is None:
            errors.add("status.reservedFor", "Forbidden: may not be specified when `allocated` is not set")
    return errors


# ---- ConfigMap ------------------------------------------------------------------------------------


def _is_config_key(key: object) -> bool:
    return (
        isinstance(key, str)
        and len(key) <= DNS1123_SUBDOMAIN_MAX
        and _CONFIG_KEY.fullmatch(key) is not None
        and key not in (".", "..")
    )


def validate_configmap(obj: JsonObj, old: JsonObj | None = None) -> list[str]:
    """ValidateConfigMap: keys are config keys, a key in at most one of data / binaryData, and the
    two together at most 1 MiB (binaryData counted decoded, as the apiserver holds it)."""
    errors = _Errors()
    total = 0
    seen: set[str] = set()
    for field_name in ("data", "binaryData"):
        values = obj.get(field_name) or {}
        if not isinstance(values, Mapping):
            errors.invalid(field_name, values, "must be a map")
            continue
        for key, value in values.items():
            path = f"{field_name}[{key}]"
            if not _is_config_key(key):
                errors.invalid(path, key, "a valid config key must consist of alphanumeric characters, '-', '_' or '.'")
            if key in seen:
                errors.invalid(path, key, "duplicate of key present in data")
            seen.add(key)
            text = value if isinstance(value, str) else ""
            total += len(text.encode()) if field_name == "data" else len(text) * 3 // 4 - text.count("=")
    if total > CONFIGMAP_MAX_BYTES:
        errors.too_long("", CONFIGMAP_MAX_BYTES)
    return errors


def validate_object_meta(obj: JsonObj) -> list[str]:
    """apimachinery's ValidateObjectMeta for labels and annotations, which every kind gets: a label
    key a qualified name and its value a label value; an annotation key a qualified name once
    lower-cased, and all annotations together (keys and values, in bytes) at most 256 KiB."""
    errors = _Errors()
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    labels = meta.get("labels") or {}
    if not isinstance(labels, Mapping):
        errors.invalid("metadata.labels", labels, "must be an object")
        labels = {}
    for key, value in labels.items():
        _label_name(errors, "metadata.labels", key)
        _label_value(errors, "metadata.labels", value)
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, Mapping):
        errors.invalid("metadata.annotations", annotations, "must be an object")
        annotations = {}
    total = 0
    for key, value in annotations.items():
        _label_name(errors, "metadata.annotations", key.lower() if isinstance(key, str) else key)
        if not isinstance(value, str):
            errors.invalid(f"metadata.annotations[{key}]", value, "must be a string")
            continue
        total += len(str(key).encode()) + len(value.encode())
    if total > ANNOTATIONS_MAX_BYTES:
        errors.too_long("metadata.annotations", ANNOTATIONS_MAX_BYTES)
    return errors


VALIDATORS: Final[Mapping[str, Callable[[JsonObj, JsonObj | None], list[str]]]] = {
    "resourceslices": validate_resource_slice,
    "resourceclaims": validate_resource_claim,
    "deviceclasses": validate_device_class,
    "configmaps": validate_configmap,
}
