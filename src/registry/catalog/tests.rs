//! The catalogue's behaviour through its handle: names granted and refused, catalogue
//! control, the search mode, registry entries, the alias map, and a rebuild off the runtime.
//! Kept together: each builds a whole catalogue with the same helpers.

use std::sync::mpsc;

use std::{collections::BTreeMap, sync::Arc};

use serde_json::Value;

use super::*;
use crate::{
    config::{SearchConfig, TransportKind},
    export::names,
    registry::entry::{RegistryEntry, ServerRef},
    tool_control::{ToolOverrides, ToolPrefix},
};
use serde_json::json;

/// A build of a catalogue with a gate waits for its signal first.
pub(super) fn wait_at_gate(catalog: &Catalog) {
    let gate = catalog.test_gate.lock().ok().and_then(|mut g| g.take());
    if let Some(gate) = gate {
        // Only a guard against a hang: the signal comes from the runtime's thread, so it
        // never arrives while this build holds that thread.
        gate.recv_timeout(std::time::Duration::from_secs(30))
            .expect("the build held the runtime's thread: the task that signals it never ran");
    }
}

#[test]
fn a_rebuild_leaves_the_runtime_free_for_calls() {
    // A current-thread runtime, as the gateway's default: the build must not run on it.
    // The build waits until a task on the runtime has run; were it on the runtime's
    // thread, that task could never run and the build would fail its guard.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let catalog = Arc::new(Catalog::new(BTreeMap::new()));
    let (signal, gate) = mpsc::channel();
    *catalog.test_gate.lock().unwrap() = Some(gate);
    let (snapshot, changes) = runtime.block_on(async {
        let rebuilding = catalog.rebuild_off_runtime(vec![server("a", &["search"])], Vec::new());
        let call_in_flight = async move {
            tokio::task::yield_now().await;
            signal.send(()).unwrap();
        };
        tokio::join!(rebuilding, call_in_flight).0
    });
    assert_eq!(snapshot.len(), 1);
    assert!(catalog.get("search").is_some(), "the new snapshot is swapped in");
    assert_eq!(changes, Changes { added: 1, removed: 0, changed: 0 });
}

fn server(name: &str, tools: &[&str]) -> ServerTools {
    ServerTools {
        server: name.into(),
        transport: TransportKind::Http,
        tools: Arc::new(ServerTools::texts(
            &tools.iter().map(|t| json!({"name": t, "inputSchema": {"type": "object"}})).collect::<Vec<_>>(),
        )),
    }
}

#[test]
fn conflicts_are_namespaced_unless_configuration_routes_them() {
    let catalog = Catalog::new(BTreeMap::new());
    catalog.rebuild(&[server("a", &["search", "only_a"]), server("b", &["search"])], &[]);
    assert!(catalog.get("search").is_none());
    assert_eq!(&*catalog.get("a__search").unwrap().upstream_name, "search");
    assert!(catalog.get("b__search").is_some());
    assert!(catalog.get("only_a").is_some());

    let routed = Catalog::new(BTreeMap::from([("search".to_string(), "b".to_string())]));
    routed.rebuild(&[server("a", &["search"]), server("b", &["search"])], &[]);
    assert_eq!(&*routed.get("search").unwrap().server, "b");
    assert!(routed.get("a__search").is_some());
}

#[test]
fn another_servers_alias_is_refused_and_names_do_not_depend_on_history() {
    let catalog = Catalog::new(BTreeMap::new());
    catalog.rebuild(&[server("demo", &["search"]), server("evil", &["demo__search"])], &[]);
    assert!(catalog.get("demo__search").is_none(), "another server's alias is refused");
    let snapshot = catalog.snapshot();
    let refused = &snapshot.collisions()[0];
    assert_eq!((refused.kind, refused.server.as_str()), ("alias_of_another_server", "evil"));
    // demo served `search` alone; evil starts offering it too: both are namespaced, exactly as
    // a catalogue built afresh (a restart) from the same lists names them. Nobody's call to
    // `search` silently reaches evil.
    let lists = [server("demo", &["search"]), server("evil", &["search", "demo__search"])];
    catalog.rebuild(&lists, &[]);
    let fresh = Catalog::new(BTreeMap::new());
    fresh.rebuild(&lists, &[]);
    for catalog in [&catalog, &fresh] {
        assert!(catalog.get("search").is_none());
        assert_eq!(&*catalog.get("demo__search").unwrap().server, "demo");
        assert_eq!(&*catalog.get("evil__search").unwrap().server, "evil");
        let kinds: Vec<&str> = catalog.snapshot().collisions().iter().map(|c| c.kind).collect();
        assert_eq!(kinds, ["alias_of_another_server", "shared_name", "shared_name"]);
    }
}

#[test]
fn a_servers_prefix_choice_decides_its_names() {
    let prefixes = |pairs: &[(&str, ToolPrefix)]| -> BTreeMap<String, ToolPrefix> {
        pairs.iter().map(|(s, p)| (s.to_string(), *p)).collect()
    };
    let lists = [server("library", &["echo", "only_library"]), server("mirror", &["echo"])];
    // `never`: library keeps `echo` whoever else offers it; mirror's copy is namespaced.
    let never = Catalog::new(BTreeMap::new()).prefixed(prefixes(&[("library", ToolPrefix::Never)]));
    never.rebuild(&lists, &[]);
    assert_eq!(&*never.get("echo").unwrap().server, "library");
    assert_eq!(&*never.get("mirror__echo").unwrap().server, "mirror");
    assert!(never.get("library__echo").is_none());
    // `always`: every tool of library is namespaced, colliding or not; mirror alone offers
    // the bare name then, and keeps it.
    let always = Catalog::new(BTreeMap::new()).prefixed(prefixes(&[("library", ToolPrefix::Always)]));
    always.rebuild(&lists, &[]);
    assert_eq!(&*always.get("library__only_library").unwrap().server, "library");
    assert_eq!(&*always.get("library__echo").unwrap().server, "library");
    assert_eq!(&*always.get("echo").unwrap().server, "mirror");
    assert!(always.snapshot().collisions().is_empty(), "a chosen prefix is no collision");
    // Two `never` servers offering one name: refused on both, unless a route names one.
    let both = prefixes(&[("library", ToolPrefix::Never), ("mirror", ToolPrefix::Never)]);
    let clash = Catalog::new(BTreeMap::new()).prefixed(both.clone());
    clash.rebuild(&lists, &[]);
    assert!(
        clash.get("echo").is_none()
            && clash.get("library__echo").is_none()
            && clash.get("mirror__echo").is_none()
    );
    let kinds: Vec<&str> = clash.snapshot().collisions().iter().map(|c| c.kind).collect();
    assert_eq!(kinds, ["never_prefixed_clash", "never_prefixed_clash"]);
    let routed = Catalog::new(BTreeMap::from([("echo".to_string(), "mirror".to_string())])).prefixed(both);
    routed.rebuild(&lists, &[]);
    assert_eq!(&*routed.get("echo").unwrap().server, "mirror");
    assert!(routed.get("library__echo").is_none(), "a never server's copy is refused, not renamed");
}

#[test]
fn a_rebuild_counts_what_it_added_removed_and_changed() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let catalog = Arc::new(Catalog::new(BTreeMap::new()));
    let mut edited = server("a", &["keep", "edit", "drop"]);
    runtime.block_on(catalog.rebuild_off_runtime(vec![edited.clone()], Vec::new()));
    let mut tools = edited.parsed();
    tools.retain(|t| t["name"] != "drop");
    tools[1]["description"] = json!("now says more");
    tools.push(json!({"name": "new", "inputSchema": {"type": "object"}}));
    edited.tools = Arc::new(ServerTools::texts(&tools));
    let (_, changes) = runtime.block_on(catalog.rebuild_off_runtime(vec![edited], Vec::new()));
    assert_eq!(changes, Changes { added: 1, removed: 1, changed: 1 });
}

fn controlled(overrides: Value, search: bool) -> Catalog {
    let overrides: BTreeMap<String, ToolOverrides> = serde_json::from_value(overrides).unwrap();
    let search = SearchConfig { enabled: search, pinned: vec!["pinned".into()], max_results: 5 };
    Catalog::new(BTreeMap::new()).controlled(overrides, &search)
}

#[test]
fn catalogue_control_renames_hides_and_keeps_the_settings_name() {
    let catalog = controlled(
        json!({"a": {"rename": "b"}, "b": {"rename": "a"}, "gone": {"hide": true},
        "c": {"fixed_arguments": {"x": 1}}}),
        false,
    );
    catalog.rebuild(&[server("s", &["a", "b", "gone", "c"])], &[]);
    let swapped = catalog.get("b").unwrap();
    assert_eq!((&*swapped.upstream_name, swapped.settings_name()), ("a", "a"), "two tools may swap names");
    assert_eq!(&*catalog.get("a").unwrap().upstream_name, "b");
    assert!(catalog.get("gone").is_none(), "hidden");
    // `c`'s schema has no property `x`: withheld, and reported.
    assert!(catalog.get("c").is_none());
    let snapshot = catalog.snapshot();
    let refused = &snapshot.collisions()[0];
    assert_eq!((refused.kind, refused.name.as_str()), ("override_invalid", "c"));
    assert!(refused.detail.as_deref().unwrap().contains("not a property"), "{refused:?}");
    let list: Value = serde_json::from_slice(&catalog.list_result()).unwrap();
    assert_eq!(list["tools"].as_array().unwrap().len(), 2);
}

#[test]
fn a_rename_never_takes_a_name_another_tool_keeps() {
    let catalog = controlled(json!({"a": {"rename": "b"}}), false);
    catalog.rebuild(&[server("s", &["a", "b"])], &[]);
    assert_eq!(&*catalog.get("b").unwrap().upstream_name, "b");
    assert!(catalog.get("a").is_none());
    assert_eq!(catalog.snapshot().collisions()[0].kind, "rename_clash");
}

#[test]
fn search_mode_lists_the_meta_tools_and_the_pinned_ones_and_reserves_their_names() {
    let catalog = controlled(json!({}), true);
    catalog.rebuild(&[server("s", &["pinned", "other", "search_tools"])], &[]);
    let list: Value = serde_json::from_slice(&catalog.list_result()).unwrap();
    let names: Vec<&str> =
        list["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["search_tools", "call_tool", "pinned"]);
    assert!(catalog.get("other").is_some(), "every tool stays callable by name");
    assert_eq!(&*catalog.get("s__search_tools").unwrap().upstream_name, "search_tools");
    assert!(catalog.get("search_tools").is_none());
    let snapshot = catalog.snapshot();
    assert_eq!(snapshot.search_index().unwrap().len(), 3);
    assert_eq!(snapshot.collisions()[0].kind, "reserved_name");
}

#[test]
fn registry_entries_take_their_own_overrides_under_the_configurations() {
    let catalog = controlled(json!({"entry_tool": {"description": "from configuration"}}), false);
    let entry = RegistryEntry {
        tool_name: "entry_tool".into(),
        definition: json!({"description": "d", "inputSchema": {"type": "object", "properties": {"k": {"type": "string"}}}}),
        server: ServerRef {
            name: "reg".into(),
            transport: "http".into(),
            url: Some("http://127.0.0.1:1/mcp".into()),
            function: None,
            qualifier: None,
            command: None,
            lambda_event: None,
            agentcore_target: None,
        },
        status: "active".into(),
        healthy: true,
        version: 1,
        updated_at: String::new(),
        overrides: serde_json::from_value(json!({"rename": "renamed_entry", "fixed_arguments": {"k": "v"}}))
            .unwrap(),
    };
    catalog.rebuild(&[], std::slice::from_ref(&entry));
    let record = catalog.get("renamed_entry").unwrap();
    assert_eq!(record.definition.head()["description"], "from configuration");
    assert_eq!(record.control.as_ref().unwrap().fixed["k"], "v");
    assert!(record.definition.value()["inputSchema"]["properties"].get("k").is_none());
    assert!(catalog.served_record_for_entry(&entry, "entry_tool").is_none(), "not under its old name");
    assert!(catalog.served_record_for_entry(&entry, "renamed_entry").is_some());
}

#[test]
fn the_alias_map_is_built_once_per_snapshot_and_resolves_what_the_exports_give() {
    let catalog = Catalog::new(BTreeMap::new());
    let names = ["catalog.search", "9lives", "plain", "x/y"];
    catalog.rebuild(&[server("s", &names)], &[]);
    let snapshot = catalog.snapshot();
    let builds = std::cell::Cell::new(0);
    let tools: Vec<Value> = snapshot.tools().iter().map(|t| t.definition.value()).collect();
    for format in crate::export::Format::ALL {
        let body = crate::export::export(format, &tools, crate::export::Options::default());
        let mapped = body["gateway"]["names"].as_object().cloned().unwrap_or_default();
        for (exported, original) in &mapped {
            let found = snapshot.exported_alias(exported, || builds.set(builds.get() + 1));
            assert_eq!(found.map(|t| t.name.to_string()).as_deref(), original.as_str(), "{format:?}");
        }
    }
    // Alias-shaped names that stand for nothing: a probe each, no walk of the catalogue.
    for i in 0..64 {
        let unknown = format!("x_{:08x}", i);
        assert!(snapshot.exported_alias(&unknown, || builds.set(builds.get() + 1)).is_none());
        assert!(snapshot.exported_alias(&format!("x_{:016x}", i), || builds.set(builds.get() + 1)).is_none());
    }
    assert!(
        snapshot.exported_alias("plain", || builds.set(builds.get() + 1)).is_none(),
        "not a mapped shape"
    );
    assert_eq!(builds.get(), 1, "one map per snapshot, however many lookups");
    // A new snapshot builds its own.
    catalog.rebuild(&[server("s", &["other.name"])], &[]);
    let next = catalog.snapshot();
    let exported = names::assign(&names::WORD_64, &["other.name"]).0.remove(0);
    assert_eq!(
        next.exported_alias(&exported, || builds.set(builds.get() + 1))
            .map(|t| t.name.to_string())
            .as_deref(),
        Some("other.name")
    );
    assert_eq!(builds.get(), 2);
}

#[test]
fn list_is_sorted_and_names_stay_valid() {
    let catalog = Catalog::new(BTreeMap::new());
    catalog.rebuild(&[server("z", &["b", "a"])], &[]);
    let list: Value = serde_json::from_slice(&catalog.list_result()).unwrap();
    assert_eq!(list["tools"][0]["name"], "a");
    let long = namespaced(&"s".repeat(40), &"t.x".repeat(20));
    assert!(long.len() <= 64 && long.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
}

#[test]
fn a_tool_served_as_described_shares_its_servers_definition() {
    let catalog = Catalog::new(BTreeMap::new());
    let a = server("a", &["search", "only_a"]);
    catalog.rebuild(&[a.clone(), server("b", &["search"])], &[]);
    let only = catalog.get("only_a").unwrap();
    assert!(only.definition.shares(&a.tools[1]), "the very text of the server's list, not a copy");
    let namespaced = catalog.get("a__search").unwrap();
    assert!(!namespaced.definition.shares(&a.tools[0]), "a renamed tool has its own definition");
    assert_eq!(namespaced.definition.head()["name"], "a__search");
    assert_eq!(namespaced.definition.value()["name"], "a__search");
    assert_eq!(a.parsed()[0]["name"], "search", "the server's list is left as it was");
}

/// Definitions are held as text and served from it: the `tools/list` a catalogue serves is,
/// byte for byte, the list its definitions' values serialise to (what it served when it held
/// values), whatever the key order, escapes and numbers; a record's head is every field but
/// the schemas, and its whole value is the definition as listed.
#[test]
fn a_list_served_from_text_is_byte_for_byte_what_the_values_serialise_to() {
    let tools = vec![
        json!({
            "name": "b_tool",
            "zeta": 1,
            "description": "caf\u{e9} \"quoted\" \\ line\nbreak \u{1F600} <tag>",
            "inputSchema": {
                "type": "object",
                "properties": {"z": {"type": "string"}, "a": {"$ref": "#/$defs/A"}},
                "$defs": {"A": {"type": "integer", "minimum": -1.5e3}}
            },
            "annotations": {"readOnlyHint": true, "title": "B"},
            "alpha": [1.5, null, false, 12345678901234567u64, -0.0]
        }),
        json!({
            "name": "a_tool",
            "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object", "properties": {"r": {"type": "array"}}},
            "execution": {"taskSupport": "optional"}
        }),
    ];
    let catalog = Catalog::new(BTreeMap::new());
    let listed = ServerTools {
        server: "s".into(),
        transport: TransportKind::Http,
        tools: Arc::new(ServerTools::texts(&tools)),
    };
    catalog.rebuild(&[listed], &[]);
    let mut expected = br#"{"tools":["#.to_vec();
    serde_json::to_writer(&mut expected, &tools[1]).unwrap();
    expected.push(b',');
    serde_json::to_writer(&mut expected, &tools[0]).unwrap();
    expected.extend_from_slice(b"]}");
    assert_eq!(
        String::from_utf8_lossy(&catalog.list_result()),
        String::from_utf8_lossy(&expected),
        "the same bytes as the values serialised"
    );
    let page = catalog.tool_list().page(None, 1).unwrap();
    assert_eq!(page.tools, serde_json::to_vec(&tools[1]).unwrap(), "a page is the same text");
    let b = catalog.get("b_tool").unwrap();
    assert_eq!(b.definition.value(), tools[0]);
    assert_eq!(b.definition.text().text(), tools[0].to_string());
    assert!(b.definition.head().get("inputSchema").is_none(), "the head leaves the schemas out");
    assert_eq!(b.definition.head()["annotations"]["title"], "B");
    assert_eq!(b.definition.field("inputSchema"), tools[0].get("inputSchema").cloned());
    assert!(b.read_only);
    let a = catalog.get("a_tool").unwrap();
    assert_eq!(a.definition.head()["execution"]["taskSupport"], "optional");
    assert!(a.definition.head().get("outputSchema").is_none());
    assert_eq!(a.definition.field("outputSchema"), tools[1].get("outputSchema").cloned());
}

/// A `$defs` component two tools carry (two servers' tools, a renamed one included) is one
/// held text for both definitions and their validation schemas, and what they serve is still
/// each definition written out whole.
#[test]
fn a_component_two_tools_carry_is_held_once_for_both() {
    let pet = json!({"type": "object", "title": "catalogue-sharing-test-pet", "properties": {"id": {"type": "integer"}}});
    let tool = |name: &str| {
        json!({
            "name": name,
            "inputSchema": {"type": "object", "properties": {"pet": {"$ref": "#/$defs/Pet"}}, "$defs": {"Pet": pet}},
            "outputSchema": {"type": "object", "$defs": {"Pet": pet, "Other": {"type": "null"}}}
        })
    };
    let listed = |server: &str, tools: Vec<Value>| ServerTools {
        server: server.into(),
        transport: TransportKind::Http,
        tools: Arc::new(ServerTools::texts(&tools)),
    };
    let catalog = Catalog::new(BTreeMap::new());
    // Both servers name a tool `shared`: one of them is served under a prefixed name (a copy
    // of its definition, renamed).
    catalog.rebuild(
        &[listed("a", vec![tool("shared"), tool("only_a")]), listed("b", vec![tool("shared")])],
        &[],
    );
    let records: Vec<_> = catalog.snapshot().tools().to_vec();
    assert_eq!(records.len(), 3, "{:?}", records.iter().map(|r| r.name.to_string()).collect::<Vec<_>>());
    let pet_entry = |text: &crate::shared_json::SharedJson| {
        text.shared_entries().find(|e| e.starts_with("\"Pet\"")).cloned().expect("the Pet entry")
    };
    let first = pet_entry(records[0].definition.text());
    for record in &records {
        let written = record.definition.text().text().into_owned();
        assert_eq!(record.definition.value().to_string(), written);
        assert_eq!(record.definition.text().shared_entries().count(), 3, "input Pet, output Pet and Other");
        for entry in record.definition.text().shared_entries().filter(|e| e.starts_with("\"Pet\"")) {
            assert!(Arc::ptr_eq(entry, &first), "{}: the one held Pet", record.name);
        }
        assert!(
            Arc::ptr_eq(&pet_entry(record.schema.text()), &first),
            "{}: its schema's Pet too",
            record.name
        );
    }
    let page = catalog.tool_list().page(None, 10).unwrap();
    let served: Vec<Value> = page.definitions();
    assert_eq!(served.len(), 3);
    for definition in &served {
        assert_eq!(definition["inputSchema"]["$defs"]["Pet"], pet, "served whole");
    }
}
