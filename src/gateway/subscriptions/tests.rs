use super::*;

fn table(per_caller: usize, total: usize) -> ResourceSubscriptions {
    let limits = crate::config::InboundLimits {
        max_resource_subscriptions_per_caller: per_caller,
        max_resource_subscriptions: total,
        ..Default::default()
    };
    ResourceSubscriptions::new(&limits, &crate::telemetry::metrics::Metrics::new())
}

fn target(server: &str, uri: &str) -> Target {
    (Arc::from(server), crate::resource_uri::CanonicalUri::parse(uri).unwrap())
}

fn caller() -> Arc<Caller> {
    Arc::new(Caller::anonymous(None))
}

#[test]
fn the_first_subscriber_subscribes_upstream_and_the_last_one_leaving_unsubscribes() {
    let table = table(8, 100);
    let (a, b): (SubscriberKey, SubscriberKey) = ("session:a".into(), "session:b".into());
    let t = target("s", "file:///x");
    assert_eq!(table.join(&a, &caller(), &t).ok(), Some(Joined::First));
    assert_eq!(table.join(&b, &caller(), &t).ok(), Some(Joined::Shared));
    assert_eq!(table.join(&a, &caller(), &t).ok(), Some(Joined::Already), "subscribing twice is once");
    assert_eq!(table.subscriptions_gauge.with_label_values(&["s"]).get(), 1, "one upstream subscription");
    assert!(!table.part(&a, &t), "b still wants it");
    assert!(!table.part(&a, &t), "a had given it up already");
    assert!(table.part(&b, &t), "the last one leaving");
    assert_eq!(table.subscriptions_gauge.with_label_values(&["s"]).get(), 0);
    assert!(
        table.state.lock().unwrap().subscribers.is_empty(),
        "nothing kept for subscribers without streams"
    );
    assert!(table.targets_of("s").is_empty());
}

#[test]
fn each_bound_is_refused_with_its_key() {
    let table = table(2, 3);
    let (a, b): (SubscriberKey, SubscriberKey) = ("listen:1".into(), "listen:2".into());
    for uri in ["u1", "u2"] {
        assert!(table.join(&a, &caller(), &target("s", uri)).is_ok());
    }
    let limit = |err: GatewayError| err.to_error_object().data.and_then(|d| d.get("limit").cloned());
    let err = table.join(&a, &caller(), &target("s", "u3")).expect_err("per caller");
    assert_eq!(err.category, Category::Overloaded);
    assert_eq!(limit(err), Some(json!({"key": "inbound.max_resource_subscriptions_per_caller", "value": 2})));
    assert!(table.join(&b, &caller(), &target("s", "u1")).is_ok());
    let err = table.join(&b, &caller(), &target("s", "u4")).expect_err("in total");
    assert_eq!(limit(err), Some(json!({"key": "inbound.max_resource_subscriptions", "value": 3})));
    assert!(table.part(&a, &target("s", "u2")));
    assert!(table.join(&b, &caller(), &target("s", "u4")).is_ok(), "a place was freed");
    assert_eq!(table.held_by("listen:2"), 2);
}

#[test]
fn subscribers_without_a_stream_are_swept_after_the_ttl() {
    let table = table(8, 100);
    let key: SubscriberKey = "session:s".into();
    assert!(table.join(&key, &caller(), &target("s", "u")).is_ok());
    let now = std::time::Instant::now();
    assert!(table.streamless(now).is_empty(), "not yet");
    assert_eq!(table.streamless(now + STREAMLESS_TTL), vec![key.clone()]);
    if let Some(subscriber) = table.state.lock().unwrap().subscribers.get_mut(&key) {
        subscriber.sink = Some((1, mpsc::channel(1).0));
    }
    assert!(table.streamless(now + STREAMLESS_TTL).is_empty(), "a stream is attached");
}
