//! The simulation of tenants' moves between two shards (issue 37).
//!
//! A seeded run drives a deployment of two shards ([`Cluster`]: each its
//! own SQLite ledger and index, one queue, one clock) through the API, as
//! its clients and its operator would: a tenant (`mover`) writes, deletes
//! and searches while the operator moves it from shard to shard, pauses,
//! resumes and cancels moves; a second tenant (`bystander`) writes on
//! shard 1 throughout. Between the steps, cron runs (moves advance, a
//! page at a time, in a share of the run's budget as small as one page)
//! and the queue is delivered. A fault may fail any statement of the
//! protocol on either shard (`SqliteDb::fail_sql`: before it has any
//! effect, so a step is cut short there, as a crash would cut it), or an
//! upsert of the index a copy writes into.
//!
//! After every step the invariants of moves hold:
//!
//! - M1: every write the API acknowledged (202) is in the ledger of the
//!   shard the directory names: its document's latest version is at least
//!   the acknowledged one (a write refused while fenced is not
//!   acknowledged: `503 tenant_moving`);
//! - M2: exactly one shard serves the tenant: the one the directory names,
//!   whose tenant row is not `moved` or `moving_in`; on the other, the row
//!   is absent, `moving_in` or `moved`;
//! - M3: what is not served is not left: the shard that neither holds the
//!   tenant nor takes part in an open move holds no row and no vector of
//!   it;
//! - M4: every counter of both shards is a recount of its rows (usage,
//!   keyword totals, generation rows, the keyword index).
//!
//! At the end the faults stop, the open move ends (cron), the queue
//! drains, and every acknowledged document that was not deleted last is
//! found by its own words (M1 again, through search).

use super::rng::Rng;
use crate::bugs::Bugs;
use crate::config::Config;
use crate::core::failure::FailureBucket;
use crate::core::state::TenantMoveState;
use crate::native::cluster::Cluster;
use crate::native::{oracle, SqliteDb};
use crate::store::sql;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;

use super::Violation;

const ADMIN: &str = "t-admin";
const MOVER: &str = "mover";
const BYSTANDER: &str = "bystander";
const DOCS: u64 = 8;

/// What a run did (the suite sums them, to show the runs reach what they
/// should: switches, cancels, refused writes, faults).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MoveRunReport {
    pub steps: u64,
    pub writes: u64,
    pub refused_writes: u64,
    pub moves_started: u64,
    pub moves_completed: u64,
    pub moves_cancelled: u64,
    pub faults: u64,
}

/// The last write the API acknowledged of a document.
#[derive(Clone, Debug)]
struct Acked {
    version: u64,
    /// The words only this write's text holds (`None`: a delete).
    word: Option<String>,
}

struct Run {
    c: Cluster,
    rng: Rng,
    seed: u64,
    tokens: BTreeMap<&'static str, String>,
    acked: BTreeMap<(&'static str, String), Acked>,
    open_move: Option<String>,
    report: MoveRunReport,
    entropy: u8,
}

fn violation(invariant: &'static str, detail: String) -> Violation {
    Violation { invariant, detail }
}

/// The configuration of a seed: two shards, small pages, and a budget
/// share of about one page a run, or a roomy one.
fn move_config(rng: &mut Rng) -> Config {
    Config {
        chunk_size_max_tokens: 64,
        chunk_overlap_tokens: 8,
        embedding_dimensions: 32,
        shards: 2,
        move_page_documents: 1 + rng.below(4) as usize,
        cron_subrequests_max: if rng.chance(500) { 90 } else { 500 },
        directory_cache_seconds: [0, 60][rng.below(2) as usize],
        ..Config::default()
    }
}

/// Runs seed `seed` with `bugs`: its report, or the first violation.
pub fn run_move_seed(seed: u64, bugs: Bugs) -> Result<MoveRunReport, Violation> {
    let mut rng = Rng::new(seed ^ 0x6d6f_7665);
    let mut c = Cluster::with(move_config(&mut rng));
    c.bugs = bugs;
    let mut run = Run {
        c,
        rng,
        seed,
        tokens: BTreeMap::new(),
        acked: BTreeMap::new(),
        open_move: None,
        report: MoveRunReport::default(),
        entropy: 10,
    };
    run.setup()?;
    let steps = 40 + run.rng.below(120);
    for step in 0..steps {
        run.report.steps += 1;
        run.step(step)?;
        run.check()?;
    }
    run.settle()?;
    Ok(run.report)
}

impl Run {
    fn request(&mut self, method: &str, path: &str, auth: &str, body: Option<&Value>) -> Value {
        self.entropy = self.entropy.wrapping_add(1).max(10);
        let r = self.c.request(method, path, auth, body, self.entropy);
        json!({ "status": r.status, "body": r.body })
    }

    fn setup(&mut self) -> Result<(), Violation> {
        for (tenant, shard) in [(MOVER, 0), (BYSTANDER, 1)] {
            let body = json!({ "tenant_id": tenant, "shard": shard });
            let r = self.request("POST", "/v1/admin/tenants", ADMIN, Some(&body));
            expect(&r, 201, "create a tenant")?;
            let body = json!({ "scopes": ["ingest", "search"] });
            let path = format!("/v1/admin/tenants/{tenant}/tokens");
            let r = self.request("POST", &path, ADMIN, Some(&body));
            expect(&r, 201, "mint a token")?;
            let token = r["body"]["token"].as_str().unwrap_or_default().to_string();
            self.tokens.insert(tenant, token);
        }
        for i in 0..DOCS {
            self.write(MOVER, i, 0)?;
        }
        self.c.deliver_all();
        Ok(())
    }

    fn step(&mut self, step: u64) -> Result<(), Violation> {
        match self.rng.below(100) {
            0..=34 => {
                let tenant = if self.rng.chance(800) {
                    MOVER
                } else {
                    BYSTANDER
                };
                let doc = self.rng.below(DOCS);
                if self.rng.chance(100) {
                    self.delete(tenant, doc)
                } else {
                    self.write(tenant, doc, step + 1)
                }
            }
            35..=54 => {
                self.c.deliver_all();
                Ok(())
            }
            55..=79 => self.cron(),
            80..=87 => self.search(),
            88..=95 => self.operate(),
            _ => {
                // Long enough for every cache and lease to expire.
                let ms = self.c.cfg.move_cleanup_delay_ms();
                self.c.clock.advance_ms(ms);
                Ok(())
            }
        }
    }

    fn text(&self, tenant: &str, doc: u64, step: u64) -> (String, String) {
        let word = format!("w{}x{tenant}x{doc}x{step}", self.seed);
        let text = format!(
            "{word} opens document {doc}.\n\n東京の港の帳簿 {word} は移される。\n\nshard tenant move {step}"
        );
        (word, text)
    }

    fn write(&mut self, tenant: &'static str, doc: u64, step: u64) -> Result<(), Violation> {
        let (word, text) = self.text(tenant, doc, step);
        let token = self.tokens[tenant].clone();
        let r = self.request(
            "PUT",
            &format!("/v1/documents/d{doc}"),
            &token,
            Some(&json!({ "text": text })),
        );
        self.acknowledge(tenant, doc, &r, Some(word))
    }

    fn delete(&mut self, tenant: &'static str, doc: u64) -> Result<(), Violation> {
        let token = self.tokens[tenant].clone();
        let r = self.request("DELETE", &format!("/v1/documents/d{doc}"), &token, None);
        if r["status"] == 404 {
            return Ok(());
        }
        self.acknowledge(tenant, doc, &r, None)
    }

    fn acknowledge(
        &mut self,
        tenant: &'static str,
        doc: u64,
        r: &Value,
        word: Option<String>,
    ) -> Result<(), Violation> {
        self.report.writes += 1;
        match r["status"].as_u64() {
            Some(202) | Some(200) => {
                let version = r["body"]["version"].as_u64().unwrap_or(0);
                self.acked
                    .insert((tenant, format!("d{doc}")), Acked { version, word });
                Ok(())
            }
            Some(503) if r["body"]["error"]["code"] == "tenant_moving" => {
                self.report.refused_writes += 1;
                Ok(())
            }
            _ => Err(violation("M1", format!("a write answered {r}"))),
        }
    }

    fn cron(&mut self) -> Result<(), Violation> {
        self.c
            .clock
            .advance_ms(1_000 + self.rng.below(90_000) as i64);
        if self.rng.chance(300) {
            self.inject();
        }
        let (_, moves) = self.c.cron_with_moves();
        self.report.faults += moves.failures.len() as u64;
        for shard in &self.c.shards {
            shard.db.fail_sql.replace(None);
        }
        Ok(())
    }

    /// A fault before one statement of the move's protocol (or intake's
    /// guard), on either shard, or in the upsert a copy makes.
    fn inject(&mut self) {
        let names: Vec<&'static str> = sql::ALL
            .iter()
            .filter(|(n, _)| n.starts_with("MOVE") || *n == "TENANT_QUOTA_GUARD")
            .map(|(_, s)| *s)
            .collect();
        let shard = self.rng.below(2) as usize;
        if self.rng.chance(150) {
            self.c.shards[shard]
                .index
                .upsert_faults
                .fail_next(1, FailureBucket::IndexUnavailable);
        } else {
            let stmt = names[self.rng.below(names.len() as u64) as usize];
            self.c.shards[shard]
                .db
                .fail_sql
                .replace(Some((stmt, FailureBucket::DbUnavailable)));
        }
    }

    fn search(&mut self) -> Result<(), Violation> {
        let token = self.tokens[MOVER].clone();
        let body = json!({ "query": "帳簿", "top_k": 5, "mode": "hybrid" });
        let r = self.request("POST", "/v1/search", &token, Some(&body));
        // The one refusal a search may meet: the tenant between the
        // switch's two writes (a crash there), answered 503 to retry.
        if r["status"] != 200 && r["body"]["error"]["code"] != "tenant_moving" {
            return Err(violation("M2", format!("a search answered {r}")));
        }
        Ok(())
    }

    fn operate(&mut self) -> Result<(), Violation> {
        let Some(id) = self.open_move.clone() else {
            let to = 1 - self.placed()?;
            let path = format!("/v1/admin/tenants/{MOVER}/move");
            let r = self.request("POST", &path, ADMIN, Some(&json!({ "shard": to })));
            if r["status"] == 202 {
                self.report.moves_started += 1;
                self.open_move = r["body"]["move_id"].as_str().map(String::from);
            }
            return Ok(());
        };
        let action = ["pause", "resume", "cancel"][self.rng.below(3) as usize];
        let r = self.request(
            "POST",
            &format!("/v1/admin/moves/{id}/{action}"),
            ADMIN,
            None,
        );
        if r["status"] != 200 && r["status"] != 409 {
            return Err(violation("M2", format!("{action} answered {r}")));
        }
        Ok(())
    }

    /// The shard the directory places the mover on.
    fn placed(&self) -> Result<usize, Violation> {
        #[derive(Deserialize)]
        struct Placed {
            shard: usize,
        }
        let rows: Vec<Placed> = self.c.shards[0].db.inspect(
            "SELECT shard FROM tenant_placements WHERE tenant_id = 'mover'",
            vec![],
        );
        rows.first()
            .map(|p| p.shard)
            .ok_or_else(|| violation("M2", "the directory lost the tenant".into()))
    }

    fn move_state(&self, shard: usize) -> Option<Option<TenantMoveState>> {
        #[derive(Deserialize)]
        struct Row {
            move_state: Option<TenantMoveState>,
        }
        let rows: Vec<Row> = self.c.shards[shard].db.inspect(
            "SELECT move_state FROM tenants WHERE tenant_id = 'mover'",
            vec![],
        );
        rows.first().map(|r| r.move_state)
    }

    /// The open move's state, if one is open (its end forgets it).
    fn refresh_move(&mut self) -> Option<String> {
        let id = self.open_move.clone()?;
        #[derive(Deserialize)]
        struct Row {
            state: String,
        }
        let rows: Vec<Row> = self.c.shards[0].db.inspect(
            "SELECT state FROM tenant_moves WHERE move_id = ?1",
            vec![id.as_str().into()],
        );
        let state = rows.first()?.state.clone();
        match state.as_str() {
            "completed" => self.report.moves_completed += 1,
            "cancelled" => self.report.moves_cancelled += 1,
            _ => return Some(state),
        }
        self.open_move = None;
        None
    }

    fn check(&mut self) -> Result<(), Violation> {
        let open = self.refresh_move();
        let placed = self.placed()?;
        let other = 1 - placed;
        // M1: nothing acknowledged is missing where the tenant is.
        let versions = oracle::document_versions(&self.c.shards[placed].db);
        for ((tenant, doc), ack) in &self.acked {
            let key = format!("{tenant}\u{1f}{doc}");
            let db = if *tenant == MOVER { placed } else { 1 };
            let versions = if db == placed {
                &versions
            } else {
                &oracle::document_versions(&self.c.shards[db].db)
            };
            let latest = versions.get(&key).map_or(0, |v| u64::from(v.0));
            if latest < ack.version {
                return Err(violation(
                    "M1",
                    format!(
                        "{tenant}/{doc}: version {} was acknowledged, shard {db} holds {latest} (move {open:?})",
                        ack.version
                    ),
                ));
            }
        }
        // M2: one shard serves.
        let here = self.move_state(placed);
        let serving = matches!(
            here,
            Some(None | Some(TenantMoveState::Copying | TenantMoveState::Fenced))
        );
        let switching = open.as_deref() == Some("switched");
        let arriving = switching && here == Some(Some(TenantMoveState::MovingIn));
        if !(serving || arriving) {
            return Err(violation(
                "M2",
                format!("shard {placed} is placed but its row says {here:?} (move {open:?})"),
            ));
        }
        let there = self.move_state(other);
        let left = matches!(
            there,
            None | Some(Some(TenantMoveState::MovingIn | TenantMoveState::Moved))
        );
        let leaving = switching && there == Some(Some(TenantMoveState::Fenced));
        if !(left || leaving) {
            return Err(violation(
                "M2",
                format!("shard {other} is not placed but its row says {there:?} (move {open:?})"),
            ));
        }
        // M3: a shard that neither holds it nor takes part in a move
        // holds nothing of it.
        if open.is_none() {
            let left = held(&self.c.shards[other].db, &self.c.shards[other].index);
            if left.iter().any(|(_, n)| *n > 0) {
                return Err(violation(
                    "M3",
                    format!("shard {other} still holds the tenant: {left:?}"),
                ));
            }
        }
        // M4: every counter is a recount.
        for (n, shard) in self.c.shards.iter().enumerate() {
            let drift = counters_drift(&shard.db);
            if !drift.is_empty() {
                return Err(violation("M4", format!("shard {n}: {drift:?}")));
            }
        }
        Ok(())
    }

    /// The faults stop; the open move ends (a paused one is resumed); the
    /// queue drains; every acknowledged document is found by its words.
    fn settle(&mut self) -> Result<(), Violation> {
        if let Some(id) = self.open_move.clone() {
            self.request("POST", &format!("/v1/admin/moves/{id}/resume"), ADMIN, None);
        }
        for _ in 0..200 {
            self.c.deliver_all();
            if self.refresh_move().is_none() {
                break;
            }
            self.c.clock.advance_ms(60_000);
            self.c.cron_with_moves();
            self.check()?;
        }
        if let Some(id) = &self.open_move {
            return Err(violation("M2", format!("move {id} never ended")));
        }
        // Jobs a move carried are sent by cron once stalled.
        for _ in 0..3 {
            let stall = i64::from(self.c.cfg.job_stall_seconds) * 1000 + 1;
            self.c.clock.advance_ms(stall);
            self.c.cron();
            self.c.deliver_all();
        }
        self.check()?;
        for ((tenant, doc), ack) in self.acked.clone() {
            let Some(word) = &ack.word else { continue };
            let token = self.tokens[tenant].clone();
            let body = json!({ "query": word, "top_k": 3, "mode": "keyword" });
            let r = self.request("POST", "/v1/search", &token, Some(&body));
            let found = r["body"]["results"]
                .as_array()
                .is_some_and(|hits| hits.iter().any(|h| h["doc_id"] == doc.as_str()));
            if !found {
                return Err(violation(
                    "M1",
                    format!(
                        "{tenant}/{doc} (version {}) is not found by {word}: {r}",
                        ack.version
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn expect(r: &Value, status: u64, what: &str) -> Result<(), Violation> {
    if r["status"] == status {
        Ok(())
    } else {
        Err(violation("M2", format!("{what} answered {r}")))
    }
}

/// The mover's rows, table by table, and its vectors, on one shard.
fn held(db: &SqliteDb, index: &crate::native::MemIndex) -> Vec<(&'static str, i64)> {
    let mut out: Vec<(&'static str, i64)> = [
        "documents",
        "versions",
        "version_parts",
        "jobs",
        "chunks",
        "dead_letters",
        "tenant_tokens",
        "tenants",
    ]
    .into_iter()
    .map(|t| {
        let sql = format!("SELECT count(*) AS n FROM {t} WHERE tenant_id = 'mover'");
        (t, oracle::count(db, &sql))
    })
    .collect();
    let vectors = index
        .namespaces()
        .into_iter()
        .filter(|(_, ns)| ns == MOVER)
        .count();
    out.push(("vectors", vectors as i64));
    out
}

/// What of a shard's counters differs from a recount of its rows.
fn counters_drift(db: &SqliteDb) -> Vec<String> {
    let mut out: Vec<String> = oracle::tenant_usage_mismatches(db)
        .into_iter()
        .map(|r| format!("usage {r}"))
        .collect();
    out.extend(oracle::keyword_totals_drift(db));
    out.extend(
        oracle::generation_rows_drift(db)
            .into_iter()
            .map(|g| format!("generation {g} rows")),
    );
    let mismatches = oracle::keyword_mismatches(db);
    if mismatches > 0 {
        out.push(format!("{mismatches} keyword entries"));
    }
    out
}
