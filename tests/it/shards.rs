//! Shards (issue 37): tenants placed on several ledgers and indexes by the
//! directory on shard 0, each tenant's requests, jobs and cron work on its
//! own shard only, and a deployment of one shard unchanged.

use crate::common::oracle;
use ingest_pipeline::api::ApiResponse;
use ingest_pipeline::config::Config;
use ingest_pipeline::native::cluster::Cluster;
use ingest_pipeline::pipeline::fleet::Shards;
use ingest_pipeline::ports::Clock;
use serde_json::{json, Value};

const ADMIN: &str = "t-admin";

fn cluster(shards: u16) -> Cluster {
    Cluster::with(Config {
        chunk_size_max_tokens: 160,
        chunk_overlap_tokens: 16,
        embedding_dimensions: 64,
        shards,
        ..Config::default()
    })
}

fn code(r: &ApiResponse) -> &str {
    r.body["error"]["code"].as_str().unwrap_or("<none>")
}

/// Creates `tenant` with `placement` (`shard`, `dedicated`); the response.
fn create(c: &Cluster, tenant: &str, placement: Value) -> ApiResponse {
    let mut body = json!({ "tenant_id": tenant });
    if let (Some(b), Some(p)) = (body.as_object_mut(), placement.as_object()) {
        b.extend(p.clone());
    }
    c.request("POST", "/v1/admin/tenants", ADMIN, Some(&body), 1)
}

/// A token of `tenant` with every scope (`entropy` makes it unique).
fn token(c: &Cluster, tenant: &str, entropy: u8) -> String {
    let body = json!({ "scopes": ["ingest", "search"] });
    let path = format!("/v1/admin/tenants/{tenant}/tokens");
    let r = c.request("POST", &path, ADMIN, Some(&body), entropy);
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["token"].as_str().unwrap().to_string()
}

fn put(c: &Cluster, token: &str, doc: &str, text: &str) -> ApiResponse {
    let body = json!({ "text": text });
    c.request(
        "PUT",
        &format!("/v1/documents/{doc}"),
        token,
        Some(&body),
        0,
    )
}

fn search(c: &Cluster, token: &str, q: &str) -> Vec<String> {
    let body = json!({ "query": q, "top_k": 10 });
    let r = c.request("POST", "/v1/search", token, Some(&body), 0);
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["text"].as_str().unwrap().to_string())
        .collect()
}

/// Rows of `tenant`'s documents in shard `n`'s ledger.
fn documents_on(c: &Cluster, n: usize, tenant: &str) -> i64 {
    let sql = format!("SELECT count(*) AS n FROM documents WHERE tenant_id = '{tenant}'");
    oracle::count(&c.shards[n].db, &sql)
}

#[test]
fn a_tenant_is_placed_on_the_least_full_shard_or_where_the_operator_pins_it() {
    let c = cluster(3);
    // Equal databases: the one with the fewest tenants (`default` is on 0).
    let r = create(&c, "auto-one", json!({}));
    assert_eq!(
        (r.status, r.body["shard"].clone()),
        (201, json!(1)),
        "{}",
        r.body
    );
    let r = create(&c, "pinned", json!({ "shard": 0 }));
    assert_eq!(
        (r.status, r.body["shard"].clone()),
        (201, json!(0)),
        "{}",
        r.body
    );
    // Shard 2 is now the one with no tenant.
    let r = create(&c, "auto-two", json!({}));
    assert_eq!(r.body["shard"], 2, "{}", r.body);
    // Each tenant's row is on its shard and nowhere else.
    for (n, tenant) in [(1, "auto-one"), (0, "pinned"), (2, "auto-two")] {
        for (m, shard) in c.shards.iter().enumerate() {
            let sql = format!("SELECT count(*) AS n FROM tenants WHERE tenant_id = '{tenant}'");
            assert_eq!(
                oracle::count(&shard.db, &sql),
                i64::from(m == n),
                "{tenant} on {m}"
            );
        }
    }
    // The listing reads each tenant on its shard.
    let r = c.request("GET", "/v1/admin/tenants", ADMIN, None, 0);
    let listed: Vec<(String, u64)> = r.body["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["tenant_id"].as_str().unwrap().into(),
                t["shard"].as_u64().unwrap(),
            )
        })
        .collect();
    let want = [
        ("auto-one", 1),
        ("auto-two", 2),
        ("default", 0),
        ("pinned", 0),
    ];
    assert_eq!(listed, want.map(|(t, s)| (t.to_string(), s)).to_vec());
    // A second creation of an ID is refused wherever it is.
    assert_eq!(
        code(&create(&c, "auto-one", json!({ "shard": 0 }))),
        "tenant_exists"
    );
    // A shard that does not exist, and a dedication without a shard.
    for bad in [
        json!({ "shard": 3 }),
        json!({ "shard": "1" }),
        json!({ "dedicated": true }),
    ] {
        let r = create(&c, "bad", bad.clone());
        assert_eq!((r.status, code(&r)), (422, "invalid_field"), "{bad}");
    }
}

#[test]
fn a_tenant_s_documents_jobs_and_searches_stay_on_its_shard() {
    let c = cluster(2);
    assert_eq!(create(&c, "left", json!({ "shard": 0 })).status, 201);
    assert_eq!(create(&c, "right", json!({ "shard": 1 })).status, 201);
    let left = token(&c, "left", 1);
    let right = token(&c, "right", 2);
    // The same document ID in each tenant.
    assert_eq!(
        put(&c, &left, "doc", "the left tenant's harbour ledger").status,
        202
    );
    assert_eq!(put(&c, &right, "doc", "右のテナントの港湾台帳").status, 202);
    let shards: Vec<u16> = c.deliver_all().iter().map(|(s, _)| *s).collect();
    assert_eq!(shards, vec![0, 1], "each job runs on its tenant's shard");
    assert_eq!(
        (documents_on(&c, 0, "left"), documents_on(&c, 1, "left")),
        (1, 0)
    );
    assert_eq!(
        (documents_on(&c, 0, "right"), documents_on(&c, 1, "right")),
        (0, 1)
    );
    // Each shard's index holds its own tenant's vectors only.
    let namespaces = |n: usize| -> Vec<String> {
        c.shards[n]
            .index
            .namespaces()
            .into_iter()
            .map(|(_, ns)| ns)
            .collect()
    };
    assert!(!namespaces(0).is_empty() && namespaces(0).iter().all(|ns| ns == "left"));
    assert!(!namespaces(1).is_empty() && namespaces(1).iter().all(|ns| ns == "right"));
    assert_eq!(
        search(&c, &left, "harbour ledger"),
        vec!["the left tenant's harbour ledger"]
    );
    assert_eq!(
        search(&c, &right, "港湾台帳"),
        vec!["右のテナントの港湾台帳"]
    );
    assert!(search(&c, &left, "港湾台帳")
        .iter()
        .all(|t| !t.contains('港')));
    let r = c.request("GET", "/v1/documents/doc", &right, None, 0);
    assert_eq!(
        (r.status, r.body["state"].clone()),
        (200, json!("indexed")),
        "{}",
        r.body
    );
    // The operator's routes read the shard `?shard=` names.
    let r = c.request("GET", "/v1/admin/documents?shard=1", ADMIN, None, 0);
    assert_eq!(r.status, 200, "{}", r.body);
    let tenants: Vec<&str> = r.body["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["tenant_id"].as_str().unwrap())
        .collect();
    assert_eq!(tenants, vec!["right"]);
    let r = c.request("GET", "/v1/admin/documents?shard=2", ADMIN, None, 0);
    assert_eq!((r.status, code(&r)), (422, "invalid_field"));
}

#[test]
fn a_dedicated_shard_takes_no_other_tenant_and_is_never_chosen() {
    let c = cluster(3);
    let r = create(&c, "big", json!({ "shard": 2, "dedicated": true }));
    assert_eq!(
        (r.status, r.body["shard"].clone()),
        (201, json!(2)),
        "{}",
        r.body
    );
    let r = create(&c, "other", json!({ "shard": 2 }));
    assert_eq!((r.status, code(&r)), (409, "shard_dedicated"));
    // Shard 0 holds `default`: it cannot be given to one tenant.
    let r = create(&c, "other", json!({ "shard": 0, "dedicated": true }));
    assert_eq!((r.status, code(&r)), (409, "shard_not_empty"));
    // The policy skips it, however empty it looks.
    for n in 0..4 {
        let r = create(&c, &format!("auto-{n}"), json!({}));
        assert_ne!(r.body["shard"], 2, "{}", r.body);
    }
    let r = c.request("GET", "/v1/admin/shards", ADMIN, None, 0);
    assert_eq!(r.status, 200, "{}", r.body);
    let shards = r.body["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 3);
    assert_eq!(shards[2]["dedicated_to"], "big");
    assert_eq!(shards[2]["takes_new_tenants"], false);
    assert_eq!(shards[2]["tenants"], 1);
    assert!(shards[0]["size_bytes"].as_u64().unwrap() > 0);
    // Nothing was placed by the refusals.
    let placed = oracle::count(
        &c.shards[0].db,
        "SELECT count(*) AS n FROM tenant_placements",
    );
    assert_eq!(placed, 1 + 1 + 4); // default, big, auto-0..3
}

#[test]
fn no_shard_at_the_full_line_takes_a_new_tenant_but_a_pin_still_may() {
    let c = Cluster::with(Config {
        shards: 2,
        shard_full_bytes: 1,
        ..Config::default()
    });
    let r = create(&c, "late", json!({}));
    assert_eq!((r.status, code(&r)), (503, "no_shard_available"));
    let r = c.request("GET", "/v1/admin/shards", ADMIN, None, 0);
    let takes: Vec<&Value> = r.body["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["takes_new_tenants"])
        .collect();
    assert_eq!(takes, vec![&json!(false), &json!(false)]);
    let r = create(&c, "late", json!({ "shard": 1 }));
    assert_eq!(
        (r.status, r.body["shard"].clone()),
        (201, json!(1)),
        "{}",
        r.body
    );
}

#[test]
fn a_token_is_checked_on_its_tenant_s_shard_and_a_revoked_one_leaves_the_directory() {
    let c = cluster(2);
    assert_eq!(create(&c, "right", json!({ "shard": 1 })).status, 201);
    let t = token(&c, "right", 7);
    // The secret lives with the tenant, the pointer in the directory.
    let secrets =
        |n: usize| oracle::count(&c.shards[n].db, "SELECT count(*) AS n FROM tenant_tokens");
    assert_eq!((secrets(0), secrets(1)), (0, 1));
    let pointers = || oracle::count(&c.shards[0].db, "SELECT count(*) AS n FROM token_directory");
    assert_eq!(pointers(), 1);
    assert_eq!(put(&c, &t, "a", "text").status, 202);
    // A token of the right shape whose secret is wrong.
    let wrong = format!(
        "{}{}",
        &t[..t.len() - 1],
        if t.ends_with('0') { '1' } else { '0' }
    );
    assert_eq!(code(&put(&c, &wrong, "a", "text")), "unauthorized");
    let token_id = t.split('_').nth(1).unwrap();
    let path = format!("/v1/admin/tenants/right/tokens/{token_id}");
    assert_eq!(c.request("DELETE", &path, ADMIN, None, 0).status, 200);
    assert_eq!(pointers(), 0);
    assert_eq!(code(&put(&c, &t, "a", "text")), "unauthorized");
}

#[test]
fn a_known_token_reads_nothing_on_shard_0_while_the_directory_cache_keeps_it() {
    let statements_on_0 = |cache_seconds: u32| {
        let c = Cluster::with(Config {
            shards: 2,
            directory_cache_seconds: cache_seconds,
            ..Config::default()
        });
        assert_eq!(create(&c, "right", json!({ "shard": 1 })).status, 201);
        let t = token(&c, "right", 5);
        // The statements a request runs on shard 0.
        let on_0 = || {
            c.shards[0].db.executed.borrow_mut().clear();
            assert_eq!(
                c.request("GET", "/v1/documents/none", &t, None, 0).status,
                404
            );
            c.shards[0].db.executed.borrow().clone()
        };
        let first = on_0();
        let second = on_0();
        // Past the cache's time the directory is read again.
        c.clock.advance_ms(i64::from(cache_seconds) * 1000);
        (first, second, on_0())
    };
    let lookup = ingest_pipeline::store::sql::TOKEN_PLACEMENT;
    let (first, second, expired) = statements_on_0(60);
    assert_eq!(first.into_iter().collect::<Vec<_>>(), vec![lookup]);
    assert!(second.is_empty(), "{second:?}");
    assert_eq!(expired.into_iter().collect::<Vec<_>>(), vec![lookup]);
    // Without the cache every request reads the directory.
    let (_, second, _) = statements_on_0(0);
    assert_eq!(second.into_iter().collect::<Vec<_>>(), vec![lookup]);
}

#[test]
fn a_token_the_directory_could_not_record_is_revoked_and_never_handed_out() {
    use ingest_pipeline::core::failure::FailureBucket;
    use ingest_pipeline::store::sql::TOKEN_DIRECTORY_INSERT;
    let c = cluster(2);
    assert_eq!(create(&c, "right", json!({ "shard": 1 })).status, 201);
    *c.shards[0].db.fail_sql.borrow_mut() =
        Some((TOKEN_DIRECTORY_INSERT, FailureBucket::DbUnavailable));
    let body = json!({ "scopes": ["ingest"] });
    let r = c.request(
        "POST",
        "/v1/admin/tenants/right/tokens",
        ADMIN,
        Some(&body),
        9,
    );
    assert_eq!((r.status, code(&r)), (503, "db_unavailable"), "{}", r.body);
    assert!(r.body.get("token").is_none());
    // Its row on the tenant's shard is revoked; the next mint works.
    let live = "SELECT count(*) AS n FROM tenant_tokens WHERE revoked_at IS NULL";
    let all = "SELECT count(*) AS n FROM tenant_tokens";
    assert_eq!(
        (
            oracle::count(&c.shards[1].db, live),
            oracle::count(&c.shards[1].db, all)
        ),
        (0, 1)
    );
    let t = token(&c, "right", 10);
    assert_eq!(put(&c, &t, "a", "after the retry").status, 202);
}

#[test]
fn a_creation_that_stopped_after_its_placement_is_completed_by_the_next() {
    let c = cluster(2);
    let fleet = c.fleet();
    let placement = ingest_pipeline::store::NewPlacement {
        tenant_id: "half",
        shard: ingest_pipeline::core::shards::ShardId(1),
        dedicated: false,
        tenants_max: 10,
        now: c.clock.now_ms(),
    };
    assert!(futures::executor::block_on(fleet.control().store.place_tenant(&placement)).unwrap());
    // Placed, not created: the tenant's routes find nothing.
    let r = c.request("GET", "/v1/admin/tenants/half", ADMIN, None, 0);
    assert_eq!(code(&r), "tenant_not_found");
    // Created where it was placed, even though the policy would pick shard 0
    // now... or asked for shard 0: the placement stands.
    let r = create(&c, "half", json!({ "shard": 0 }));
    assert_eq!(
        (r.status, r.body["shard"].clone()),
        (201, json!(1)),
        "{}",
        r.body
    );
    assert_eq!(code(&create(&c, "half", json!({}))), "tenant_exists");
}

#[test]
fn cron_repairs_every_shard_and_requeues_a_lost_job_on_its_own_shard() {
    let c = cluster(2);
    assert_eq!(create(&c, "right", json!({ "shard": 1 })).status, 201);
    let t = token(&c, "right", 3);
    assert_eq!(put(&c, &t, "lost", "a message the queue lost").status, 202);
    let lost = c.queue.take_all();
    assert_eq!(lost.iter().map(|m| m.shard).collect::<Vec<_>>(), vec![1]);
    c.clock
        .advance_ms(i64::from(c.cfg.job_stall_seconds) * 1000 + 1);
    let reports = c.cron();
    assert_eq!(reports.len(), 2);
    assert_eq!((reports[0].jobs_requeued, reports[1].jobs_requeued), (0, 1));
    // Each shard's run stayed within its half of the run's subrequests.
    for r in &reports {
        assert!(
            r.subrequests_used <= c.cfg.cron_subrequests_max / 2,
            "{r:?}"
        );
    }
    let again = c
        .queue
        .sent
        .borrow()
        .iter()
        .map(|m| m.shard)
        .collect::<Vec<_>>();
    assert_eq!(again, vec![1]);
    c.deliver_all();
    let r = c.request("GET", "/v1/documents/lost", &t, None, 0);
    assert_eq!(r.body["state"], "indexed", "{}", r.body);
}

#[test]
fn with_one_shard_nothing_is_looked_up_and_every_tenant_is_on_shard_0() {
    let c = cluster(1);
    let r = create(&c, "solo", json!({}));
    assert_eq!(
        (r.status, r.body["shard"].clone()),
        (201, json!(0)),
        "{}",
        r.body
    );
    let t = token(&c, "solo", 4);
    assert_eq!(put(&c, &t, "a", "one shard").status, 202);
    // Messages of shard 0 carry no shard: what a deployment sent before.
    let sent = c.queue.sent.borrow().clone();
    let wire = serde_json::to_value(&sent[0]).unwrap();
    assert!(wire.get("shard").is_none(), "{wire}");
    // The directory still records the tenant and its token, for a second
    // shard added later.
    let placed = oracle::count(
        &c.shards[0].db,
        "SELECT count(*) AS n FROM tenant_placements WHERE tenant_id = 'solo'",
    );
    assert_eq!(placed, 1);
    let r = create(&c, "elsewhere", json!({ "shard": 1 }));
    assert_eq!((r.status, code(&r)), (422, "invalid_field"));
}
