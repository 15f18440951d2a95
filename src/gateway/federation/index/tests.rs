//! The index's routing rules, each decided on small surfaces.

use super::*;

fn uri(text: &str) -> CanonicalUri {
    CanonicalUri::parse(text).unwrap()
}

fn surface(resources: &[&str], templates: &[&str], prompts: &[&str]) -> ServerSurface {
    ServerSurface {
        resources: resources
            .iter()
            .filter_map(|u| {
                Listed::resource(json!({"uri": u, "name": u}), &mut listed::MimeTypes::default()).ok()
            })
            .collect(),
        templates: templates
            .iter()
            .filter_map(|t| {
                Listed::template(&json!({"uriTemplate": t, "name": t}), &mut listed::MimeTypes::default())
            })
            .collect(),
        prompts: prompts.iter().map(|n| json!({"name": n})).collect(),
        completions: !prompts.is_empty(),
        subscribe: false,
        ..ServerSurface::default()
    }
}

fn index(prefixes: &[(&str, &[&str])]) -> Index {
    let servers = vec![
        (
            Arc::from("cart"),
            surface(&["manga://cart/current", "shared://x"], &["manga://cart/{id}"], &["reply", "cart_help"]),
        ),
        (
            Arc::from("catalog"),
            surface(&["manga://catalog/top", "shared://x"], &["manga://catalog/{id}"], &["reply"]),
        ),
    ];
    let prefixes: Vec<(Arc<str>, Vec<String>)> =
        prefixes.iter().map(|(s, p)| (Arc::from(*s), p.iter().map(|x| x.to_string()).collect())).collect();
    Index::build(&servers, &prefixes, &Control::default())
}

#[test]
fn uris_route_by_listing_then_template_and_a_claimed_one_by_nobody() {
    let index = index(&[]);
    assert_eq!(&*index.route_uri(&uri("manga://cart/current")).unwrap(), "cart");
    assert_eq!(&*index.route_uri(&uri("manga://catalog/top")).unwrap(), "catalog");
    assert_eq!(&*index.route_uri(&uri("manga://catalog/MNG-1")).unwrap(), "catalog", "by template");
    assert_eq!(index.route_uri(&uri("manga://nowhere/1")), Err(Unroutable::Unknown));
    let claimed = index.route_uri(&uri("shared://x")).unwrap_err();
    assert_eq!(claimed, Unroutable::Claimed(vec!["cart".into(), "catalog".into()]));
    assert!(index.resources.iter().all(|r| r.uri.as_str() != "shared://x"), "a claimed URI is not listed");
    let resource = Collision {
        kind: "resource",
        name: "shared://x".into(),
        servers: vec!["cart".into(), "catalog".into()],
    };
    assert!(index.collisions.contains(&resource), "{:?}", index.collisions);
}

#[test]
fn an_operator_prefix_wins_and_names_the_owner_of_a_claimed_uri() {
    let index = index(&[("catalog", &["shared://"]), ("cart", &["manga://catalog/special/"])]);
    assert_eq!(&*index.route_uri(&uri("shared://x")).unwrap(), "catalog");
    assert_eq!(&*index.route_uri(&uri("manga://catalog/special/1")).unwrap(), "cart", "longest prefix first");
    assert_eq!(&*index.route_uri(&uri("shared://unlisted/thing")).unwrap(), "catalog");
    let listed = index.resource(&uri("shared://x")).expect("the named owner's definition is listed");
    assert_eq!(&*listed.server, "catalog");
    assert!(index.collisions.iter().all(|c| c.name != "shared://x"), "an owned URI is no collision");
}

#[test]
fn a_prompt_name_two_servers_offer_is_namespaced_for_both() {
    let index = index(&[]);
    let names: Vec<&str> = index.prompts.iter().map(|p| &*p.name).collect();
    assert_eq!(names, ["cart__reply", "cart_help", "catalog__reply"]);
    let reply = index.prompt("catalog__reply").unwrap();
    assert_eq!((&*reply.server, &*reply.upstream_name), ("catalog", "reply"));
    assert_eq!(reply.definition["name"], "catalog__reply");
    assert!(index.prompt("reply").is_none());
}

#[test]
fn catalogue_control_hides_renames_and_describes() {
    let servers = vec![(
        Arc::from("cart"),
        surface(
            &["manga://cart/current", "manga://internal/x"],
            &["manga://internal/{id}"],
            &["reply", "debug"],
        ),
    )];
    let control = Control {
        prompts: std::collections::BTreeMap::from([
            (
                "reply".to_string(),
                PromptControl {
                    rename: Some("answer".into()),
                    description: Some("How to answer.".into()),
                    hide: false,
                },
            ),
            ("debug".to_string(), PromptControl { hide: true, ..PromptControl::default() }),
        ]),
        resources: ResourceControl {
            hide: vec!["manga://internal/".into()],
            descriptions: std::collections::BTreeMap::from([(
                "manga://cart/current".to_string(),
                "The cart.".to_string(),
            )]),
        },
    };
    let index = Index::build(&servers, &[], &control);
    let names: Vec<&str> = index.prompts.iter().map(|p| &*p.name).collect();
    assert_eq!(names, ["answer"]);
    let answer = index.prompt("answer").unwrap();
    assert_eq!(
        (&*answer.upstream_name, answer.definition["description"].as_str()),
        ("reply", Some("How to answer."))
    );
    assert!(index.prompt("reply").is_none() && index.prompt("debug").is_none());
    assert_eq!(index.resources.len(), 1);
    assert_eq!(listed::parsed(&index.resources[0].definition)["description"], "The cart.");
    assert!(index.templates.is_empty(), "a hidden template is not listed");
    assert_eq!(index.route_uri(&uri("manga://internal/7")), Err(Unroutable::Unknown), "nor routed");
}

#[test]
fn a_uri_is_routed_hidden_and_looked_up_in_its_canonical_form_only() {
    let servers = vec![
        (Arc::from("files"), surface(&["file:///public/readme", "FILE:///public/./Caf%c3%a9"], &[], &[])),
        (Arc::from("other"), surface(&["file:///private/%2e%2e/private/key"], &[], &[])),
    ];
    let control = Control {
        resources: ResourceControl { hide: vec!["file:///private/".into()], ..ResourceControl::default() },
        ..Control::default()
    };
    let index = Index::build(&servers, &[], &control);
    let listed: Vec<&str> = index.resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(listed, ["file:///public/Caf%C3%A9", "file:///public/readme"], "the hidden one left out");
    let cafe = index.resource(&uri("file:///public/Café")).expect("listed under its canonical form");
    assert_eq!(listed::parsed(&cafe.definition)["uri"], "file:///public/Caf%C3%A9", "and listed so");
    assert_eq!(&*index.route_uri(&uri("file:///public/sub/../readme")).unwrap(), "files");
    for hidden in
        ["file:///public/../private/key", "file:///./private/key", "file:///public/%2E%2E/private/key"]
    {
        assert_eq!(index.route_uri(&uri(hidden)), Err(Unroutable::Unknown), "{hidden}");
    }
}

#[test]
fn a_uri_one_server_lists_and_another_templates_is_a_collision_unless_a_prefix_names_the_owner() {
    let servers = |with_own_template: bool| {
        vec![
            (Arc::from("lister"), surface(&["notes://shared/1", "notes://mine/1"], &[], &[])),
            (
                Arc::from("templater"),
                surface(
                    &[],
                    if with_own_template { &["notes://shared/{id}"] } else { &["other://{id}"] },
                    &[],
                ),
            ),
        ]
    };
    let index = Index::build(&servers(true), &[], &Control::default());
    let both = vec![Arc::<str>::from("lister"), Arc::from("templater")];
    assert_eq!(index.route_uri(&uri("notes://shared/1")), Err(Unroutable::Claimed(both.clone())));
    assert!(index.resource(&uri("notes://shared/1")).is_none(), "not listed");
    let collision = Collision { kind: "resource", name: "notes://shared/1".into(), servers: both };
    assert!(index.collisions.contains(&collision), "{:?}", index.collisions);
    assert_eq!(&*index.route_uri(&uri("notes://shared/2")).unwrap(), "templater", "an unlisted one");
    assert_eq!(&*index.route_uri(&uri("notes://mine/1")).unwrap(), "lister", "no template matches");

    let prefix = |server: &str| vec![(Arc::from(server), vec!["notes://shared/".to_string()])];
    let lister_owns = Index::build(&servers(true), &prefix("lister"), &Control::default());
    assert_eq!(&*lister_owns.route_uri(&uri("notes://shared/1")).unwrap(), "lister");
    assert!(lister_owns.resource(&uri("notes://shared/1")).is_some() && lister_owns.collisions.is_empty());
    let templater_owns = Index::build(&servers(true), &prefix("templater"), &Control::default());
    assert_eq!(&*templater_owns.route_uri(&uri("notes://shared/1")).unwrap(), "templater");
    assert!(
        templater_owns.resource(&uri("notes://shared/1")).is_none() && templater_owns.collisions.is_empty()
    );

    let apart = Index::build(&servers(false), &[], &Control::default());
    assert!(apart.collisions.is_empty() && apart.resource(&uri("notes://shared/1")).is_some());
}

fn skills(uris: &[&str]) -> ServerSurface {
    let entry = |u: &str| {
        let name = u.trim_end_matches("/SKILL.md").rsplit('/').next().unwrap_or("x");
        json!({"uri": u, "frontmatter": {"name": name, "description": "d"}, "resources": "dynamic"})
    };
    ServerSurface {
        offers_skills: true,
        skills: uris.iter().filter_map(|u| Listed::skill(entry(u)).ok()).collect(),
        ..ServerSurface::default()
    }
}

#[test]
fn a_skill_routes_its_files_to_its_server_and_a_shared_skill_uri_to_neither() {
    let servers = vec![
        (
            Arc::from("a"),
            skills(&["skill://git/SKILL.md", "skill://acme/refunds/SKILL.md", "skill://shared/SKILL.md"]),
        ),
        (Arc::from("b"), skills(&["skill://acme/refunds/nested/SKILL.md", "skill://shared/SKILL.md"])),
        (Arc::from("c"), ServerSurface::default()),
    ];
    let index = Index::build(&servers, &[], &Control::default());
    let routed = |u: &str| index.route_uri(&uri(u)).map(|s| s.to_string());
    assert_eq!(routed("skill://git/references/GUIDE.md"), Ok("a".into()));
    assert_eq!(routed("skill://acme/refunds/SKILL.md"), Ok("a".into()));
    assert_eq!(routed("skill://acme/refunds/nested/x.md"), Ok("b".into()), "the innermost skill");
    assert_eq!(routed("skill://acme/other/SKILL.md"), Err(Unroutable::Unknown));
    assert_eq!(routed("skill://gitx/SKILL.md"), Err(Unroutable::Unknown), "a directory, not a text prefix");
    let both = vec![Arc::<str>::from("a"), Arc::from("b")];
    assert_eq!(index.route_uri(&uri("skill://shared/f.md")), Err(Unroutable::Claimed(both)));
    assert!(index.skill(&uri("skill://shared/SKILL.md")).is_none());
    assert_eq!(index.skills.len(), 3);
    assert_eq!(index.skill_servers, vec![Arc::<str>::from("a"), Arc::from("b")]);
    let holding =
        |u: &str| -> Vec<&str> { index.skills_holding(&uri(u)).iter().map(|s| s.uri.as_str()).collect() };
    assert_eq!(holding("skill://git/a/b.md"), ["skill://git/SKILL.md"]);
    assert_eq!(
        holding("skill://acme/refunds/nested/x.md"),
        ["skill://acme/refunds/nested/SKILL.md", "skill://acme/refunds/SKILL.md"],
        "innermost first"
    );

    let owned =
        Index::build(&servers, &[(Arc::from("b"), vec!["skill://shared/".into()])], &Control::default());
    assert_eq!(&*owned.skill(&uri("skill://shared/SKILL.md")).unwrap().server, "b");
    assert!(
        Listed::skill(json!({"uri": "skill://x/README.md", "frontmatter": {"name": "x"}, "resources": []}))
            .is_err()
    );
    assert!(
        Listed::skill(json!({"uri": "skill://x/SKILL.md", "frontmatter": {"name": "x"}, "resources": {}}))
            .is_err()
    );
}
