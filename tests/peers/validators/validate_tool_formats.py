"""Validates a `GET /tools?format=F` / `mcp-gateway tools export` document against the
provider's OWN published types, and fails loudly (exit 1, every problem on stderr).

    validate_tool_formats.py EXPORT.json

The format comes from the document's "format" field. Checks, per format:
- bedrock: botocore's ParamValidator over the Converse input shape of the bedrock-runtime
  service model, with toolConfig = the export; the ToolSpecification name's pattern and
  max length from that same model (ParamValidator checks neither).
- anthropic: pydantic TypeAdapter over anthropic.types.ToolParam (unknown keys refused),
  the API's name rule ^[a-zA-Z0-9_-]{1,64}$, and input_schema.type == "object" with no
  oneOf/anyOf/allOf at the top level (the API refuses those).
- openai: TypeAdapter over openai.types.chat.ChatCompletionToolParam (and
  FunctionDefinition's keys), the SDK's documented name rule; with "strict": true, the
  Structured Outputs rules (every object additionalProperties false, every property
  required, no unsupported keyword).
- openai-responses: TypeAdapter over openai.types.responses.FunctionToolParam, same rules.
- gemini: google.genai.types.Tool.model_validate (the SDK's models forbid extra fields),
  the SDK's documented name rule, and no JSON-Schema-only keyword ($ref, $defs,
  additionalProperties) left in parameters.
Every format: exported names are unique.
"""

import json
import re
import sys
import warnings

WORD_64 = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
GEMINI_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}$")
STRICT_BANNED = {
    "allOf", "oneOf", "not", "if", "then", "else", "patternProperties", "dependentRequired",
    "dependentSchemas", "unevaluatedProperties", "propertyNames", "default", "minLength",
    "maxLength", "uniqueItems", "minProperties", "maxProperties", "examples",
}
GEMINI_JSON_SCHEMA_ONLY = {"$ref", "$defs", "definitions", "additionalProperties", "ref", "defs", "$schema"}

errors = []


def fail(message):
    errors.append(message)


def unique(names):
    seen = set()
    for name in names:
        if name in seen:
            fail(f"duplicate exported name {name!r}")
        seen.add(name)


def extra_keys(where, value, allowed):
    if isinstance(value, dict):
        for key in value:
            if key not in allowed:
                fail(f"{where}: key {key!r} is not in the SDK type (allowed: {sorted(allowed)})")


def validate_bedrock(doc):
    from botocore.session import Session
    from botocore.validate import ParamValidator

    shape = Session().get_service_model("bedrock-runtime").operation_model("Converse").input_shape
    params = {
        "modelId": "anthropic.claude-3-haiku-20240307-v1:0",
        "messages": [{"role": "user", "content": [{"text": "hello"}]}],
        "toolConfig": doc["toolConfig"],
    }
    report = ParamValidator().validate(params, shape)
    if report.has_errors():
        fail("botocore ParamValidator: " + report.generate_report())
    spec_shape = shape.members["toolConfig"].members["tools"].member.members["toolSpec"]
    name_meta = spec_shape.members["name"].metadata
    pattern = re.compile("^(?:" + name_meta["pattern"] + ")$")
    names = []
    for tool in doc["toolConfig"].get("tools", []) if isinstance(doc["toolConfig"], dict) else []:
        spec = tool.get("toolSpec", {}) if isinstance(tool, dict) else {}
        name = spec.get("name", "")
        names.append(name)
        if not isinstance(name, str) or not pattern.match(name) or not name_meta["min"] <= len(name) <= name_meta["max"]:
            fail(f"bedrock: name {name!r} breaks the service model's pattern {name_meta['pattern']} / length {name_meta['min']}-{name_meta['max']}")
    unique(names)
    return len(names)


def check_anthropic_schema(name, schema):
    if not isinstance(schema, dict) or schema.get("type") != "object":
        fail(f"anthropic: {name}: input_schema.type must be 'object'")
        return
    for key in ("oneOf", "anyOf", "allOf"):
        if key in schema:
            fail(f"anthropic: {name}: input_schema has {key} at the top level")


def validate_anthropic(doc):
    import anthropic.types
    from pydantic import TypeAdapter, ValidationError

    tools = doc["tools"]
    try:
        TypeAdapter(list[anthropic.types.ToolParam]).validate_python(tools)
    except ValidationError as e:
        fail(f"anthropic ToolParam: {e}")
    allowed = set(anthropic.types.ToolParam.__annotations__)
    names = []
    for i, tool in enumerate(tools):
        extra_keys(f"anthropic tools[{i}]", tool, allowed)
        name = tool.get("name", "") if isinstance(tool, dict) else ""
        names.append(name)
        if not isinstance(name, str) or not WORD_64.match(name):
            fail(f"anthropic: name {name!r} breaks ^[a-zA-Z0-9_-]{{1,64}}$")
        if isinstance(tool, dict):
            check_anthropic_schema(name, tool.get("input_schema"))
    unique(names)
    return len(tools)


def walk_strict(name, schema, path, root=False):
    if not isinstance(schema, dict):
        fail(f"strict: {name}: {path or '/'} is not an object schema")
        return
    for key in schema:
        if key in STRICT_BANNED:
            fail(f"strict: {name}: {key} at {path or '/'} is not allowed in strict mode")
    types = schema.get("type")
    types = [types] if isinstance(types, str) else (types or [])
    if "object" in types:
        if schema.get("additionalProperties") is not False:
            fail(f"strict: {name}: object at {path or '/'} lacks additionalProperties: false")
        props = schema.get("properties", {})
        if sorted(schema.get("required", [])) != sorted(props):
            fail(f"strict: {name}: object at {path or '/'} does not require every property")
        for key, sub in props.items():
            walk_strict(name, sub, f"{path}/properties/{key}")
    elif root:
        fail(f"strict: {name}: root is not an object")
    if "items" in schema:
        walk_strict(name, schema["items"], f"{path}/items")
    for i, sub in enumerate(schema.get("anyOf", [])):
        walk_strict(name, sub, f"{path}/anyOf/{i}")
    for defs in ("$defs", "definitions"):
        for key, sub in schema.get(defs, {}).items():
            walk_strict(name, sub, f"{path}/{defs}/{key}")


def check_function(kind, function, strict_export):
    name = function.get("name", "")
    if not isinstance(name, str) or not WORD_64.match(name):
        fail(f"{kind}: name {name!r} breaks the SDK's rule (a-z, A-Z, 0-9, _ and -, at most 64)")
    params = function.get("parameters")
    if not isinstance(params, dict) or params.get("type") != "object":
        fail(f"{kind}: {name}: parameters must be a type: object schema")
    if function.get("strict") is True:
        walk_strict(name, params, "", root=True)
    elif strict_export and name not in strict_export:
        fail(f"{kind}: {name}: strict export left the tool non-strict without reporting why")
    return name


def validate_openai(doc):
    from openai.types.chat import ChatCompletionToolParam
    from openai.types.shared_params import FunctionDefinition
    from pydantic import TypeAdapter, ValidationError

    tools = doc["tools"]
    try:
        TypeAdapter(list[ChatCompletionToolParam]).validate_python(tools)
    except ValidationError as e:
        fail(f"openai ChatCompletionToolParam: {e}")
    not_strict = reported_not_strict(doc)
    names = []
    for i, tool in enumerate(tools):
        extra_keys(f"openai tools[{i}]", tool, {"type", "function"})
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
            fail(f"openai tools[{i}]: not a function tool")
            continue
        extra_keys(f"openai tools[{i}].function", tool["function"], set(FunctionDefinition.__annotations__))
        names.append(check_function("openai", tool["function"], not_strict))
    unique(names)
    return len(tools)


def reported_not_strict(doc):
    gateway = doc.get("gateway", {})
    if not gateway.get("strict"):
        return None
    return {exported_name(doc, original) for original in gateway.get("not_strict", {})}


def exported_name(doc, original):
    for exported, orig in doc.get("gateway", {}).get("names", {}).items():
        if orig == original:
            return exported
    return original


def validate_openai_responses(doc):
    from openai.types.responses import FunctionToolParam
    from pydantic import TypeAdapter, ValidationError

    tools = doc["tools"]
    try:
        TypeAdapter(list[FunctionToolParam]).validate_python(tools)
    except ValidationError as e:
        fail(f"openai FunctionToolParam: {e}")
    allowed = set(FunctionToolParam.__annotations__)
    not_strict = reported_not_strict(doc)
    names = []
    for i, tool in enumerate(tools):
        extra_keys(f"openai-responses tools[{i}]", tool, allowed)
        if isinstance(tool, dict):
            names.append(check_function("openai-responses", tool, not_strict))
    unique(names)
    return len(tools)


def walk_gemini(name, schema, path):
    if not isinstance(schema, dict):
        return
    for key in schema:
        if key in GEMINI_JSON_SCHEMA_ONLY:
            fail(f"gemini: {name}: {key} at {path or '/'} is not in the OpenAPI subset of parameters")
    for key, sub in (schema.get("properties") or {}).items():
        walk_gemini(name, sub, f"{path}/properties/{key}")
    if "items" in schema:
        walk_gemini(name, schema["items"], f"{path}/items")
    for i, sub in enumerate(schema.get("anyOf") or []):
        walk_gemini(name, sub, f"{path}/anyOf/{i}")


def validate_gemini(doc):
    from google.genai import types
    from pydantic import ValidationError

    count = 0
    names = []
    for i, tool in enumerate(doc["tools"]):
        # The SDK only warns about an unknown enum value (e.g. a Type it does not know):
        # here that is a failure.
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                types.Tool.model_validate(tool)
            except ValidationError as e:
                fail(f"gemini Tool[{i}]: {e}")
            except Warning as w:
                fail(f"gemini Tool[{i}]: the SDK warns: {w}")
        for declaration in tool.get("functionDeclarations", []) if isinstance(tool, dict) else []:
            count += 1
            name = declaration.get("name", "")
            names.append(name)
            if not isinstance(name, str) or not GEMINI_NAME.match(name):
                fail(f"gemini: name {name!r} breaks the SDK's rule (letter or _ first; a-z, A-Z, 0-9, _ . : -; at most 128)")
            walk_gemini(name, declaration.get("parameters"), "")
            if "parameters" in declaration:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # already reported above
                    params = types.Schema.model_validate(declaration["parameters"])
                if params.type != types.Type.OBJECT:
                    fail(f"gemini: {name}: parameters must be an OBJECT schema")
    unique(names)
    return count


def validate_mcp(doc):
    names = []
    for tool in doc["tools"]:
        names.append(tool.get("name"))
        if not isinstance(tool.get("inputSchema"), dict):
            fail(f"mcp: {tool.get('name')!r} has no inputSchema object")
    unique(names)
    return len(names)


VALIDATORS = {
    "bedrock": validate_bedrock,
    "anthropic": validate_anthropic,
    "openai": validate_openai,
    "openai-responses": validate_openai_responses,
    "gemini": validate_gemini,
    "mcp": validate_mcp,
}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: validate_tool_formats.py EXPORT.json")
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    fmt = doc.get("format")
    if fmt not in VALIDATORS:
        sys.exit(f"INVALID: unknown format {fmt!r}")
    try:
        count = VALIDATORS[fmt](doc)
    except Exception as e:  # a malformed document must fail loudly, not crash silently
        fail(f"{type(e).__name__}: {e}")
        count = 0
    if errors:
        print(f"INVALID {fmt} export ({len(errors)} problem(s)):", file=sys.stderr)
        for e in errors:
            print(f"  - {e}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"format": fmt, "valid": True, "tools": count}))


if __name__ == "__main__":
    main()
