//! Operations: repair-run reports, the dead-letter archive and its read-only
//! diagnosis, and redrives (preflight → canary → bounded batches, with a
//! stop condition and an audit trail).
//!
//! A redrive re-runs a dead-lettered version as a *new version with the
//! same content* (`store::sql::RERUN_*`): it goes through the normal
//! protocol with fresh vector IDs, so nothing the failed run left behind can
//! interfere, and the failed version becomes an abandoned one that cron
//! sweeps. A letter whose version is no longer the latest (superseded) or is
//! already live is skipped.

use super::{
    log_event, LetterPage, Outcome, Pipeline, RedriveView, Refused, RepairReport, RepairRunView,
};
use crate::bugs::Bug;
use crate::core::ids::{job_id, sha256_hex, split_key, DocKey};
use crate::core::state::{
    JobState, RedriveItemState as ItemState, RedrivePhase, RedriveState, TenantMoveState,
};
use crate::ports::{Clock, Database, Embedder, JobMessage, JobQueue, PortError, VectorIndex};
pub use crate::store::LetterFilter;
use crate::store::{
    Candidate, CandidateFilter, ItemRow, LetterGroupRow, NewItem, RedriveRow, RerunOf,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// What a re-run of a version did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rerun {
    /// A new version with the same content, and its job, sent.
    Sent { version: u32, job_id: String },
    /// Its condition no longer held (a newer version, an item no longer
    /// pending): nothing written.
    NotApplicable,
    /// Its tenant takes no write on this shard now (a move's fence, or
    /// moved away, or moving in): nothing written.
    TenantMoving,
}

/// What a redrive asks for. Defaults: canary 3, no failed canary allowed,
/// at most 20 % failures in later batches, batches of 10.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct RedriveRequest {
    pub bucket: Option<String>,
    pub since: Option<i64>,
    pub until: Option<i64>,
    /// Stored document keys (`core::ids::DocKey`).
    pub doc_ids: Option<Vec<String>>,
    /// Only this tenant's letters (`None`: every tenant's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    pub canary_size: usize,
    pub max_failed_canaries: usize,
    pub max_failure_ratio: f64,
    pub batch_size: usize,
}

/// Letters a redrive considers at most.
pub const REDRIVE_LETTERS_MAX: usize = 1000;

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct PlanItem {
    pub job_id: String,
    pub tenant_id: String,
    #[serde(serialize_with = "crate::core::ids::serialize_doc_id")]
    pub doc_id: String,
    pub version: u32,
    pub failure_bucket: Option<String>,
}

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct Plan {
    pub plan_id: String,
    pub matched: usize,
    pub eligible: Vec<PlanItem>,
    /// Letters that would be skipped, with why.
    pub skipped: Vec<SkippedItem>,
    /// The eligible letters' document IDs (each of its item's tenant).
    pub documents: Vec<String>,
    pub canaries: Vec<String>,
}

/// A letter a redrive would skip.
#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct SkippedItem {
    pub job_id: String,
    pub tenant_id: String,
    #[serde(serialize_with = "crate::core::ids::serialize_doc_id")]
    pub doc_id: String,
    pub version: u32,
    /// `superseded`, `already_live`, `already_redriven`, `document_missing`,
    /// or `in_flight`: its job is still queued or running (the queue gave
    /// up on a message of a live job).
    pub reason: &'static str,
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    /// Stores the report of one scheduled run.
    pub async fn record_repair_run(
        &self,
        started_at: i64,
        report: &RepairReport,
    ) -> Result<(), PortError> {
        let report_json = serde_json::to_string(report).expect("report serializes");
        self.store
            .record_repair_run(
                started_at,
                self.clock.now_ms(),
                &report_json,
                report.budget_hit,
            )
            .await
    }

    /// The latest cron runs' reports, newest first (those that touched
    /// `tenant_id`'s documents or jobs, if given).
    pub async fn repair_runs(
        &self,
        limit: usize,
        tenant_id: Option<&str>,
    ) -> Result<Vec<RepairRunView>, PortError> {
        let rows = self.store.repair_runs(limit, tenant_id).await?;
        Ok(rows.into_iter().map(RepairRunView::from_row).collect())
    }

    /// Archives a dead-lettered message with a snapshot of its job. Idempotent.
    pub async fn archive_dead_letter(
        &self,
        message_id: &str,
        msg: &JobMessage,
    ) -> Result<(), PortError> {
        self.record_dead_letter(false, message_id, msg).await
    }

    /// The dead-letter consumer's receipt of a letter already archived.
    pub(super) async fn confirm_dead_letter(
        &self,
        message_id: &str,
        msg: &JobMessage,
    ) -> Result<(), PortError> {
        self.record_dead_letter(true, message_id, msg).await
    }

    async fn record_dead_letter(
        &self,
        confirm: bool,
        message_id: &str,
        msg: &JobMessage,
    ) -> Result<(), PortError> {
        let now = self.clock.now_ms();
        if !confirm {
            self.store.archive_dead_letter(message_id, msg, now).await?;
        } else {
            self.store.confirm_dead_letter(message_id, msg, now).await?;
        }
        log_event(
            "dead_letter_archived",
            json!({ "job_id": msg.job_id, "message_id": message_id }),
        );
        Ok(())
    }

    /// The archive grouped for diagnosis (of one tenant, or all).
    pub async fn dead_letter_summary(
        &self,
        tenant_id: Option<&str>,
    ) -> Result<Vec<LetterGroupRow>, PortError> {
        self.store.dead_letter_summary(tenant_id).await
    }

    /// A page of the archive matching the filter.
    pub async fn dead_letters(&self, f: &LetterFilter) -> Result<LetterPage, PortError> {
        let letters = self.store.dead_letters(f).await?;
        let next_cursor = if letters.len() == f.limit {
            letters
                .last()
                .map(|r| format!("{}|{}", r.last_seen, r.job_id))
        } else {
            None
        };
        Ok(LetterPage {
            letters,
            next_cursor,
        })
    }

    /// The preflight: what a redrive would do. Changes nothing.
    pub async fn redrive_plan(&self, req: &RedriveRequest) -> Result<Plan, PortError> {
        let rows = self
            .store
            .redrive_candidates(
                &CandidateFilter {
                    bucket: req.bucket.as_deref(),
                    since: req.since,
                    until: req.until,
                    doc_ids: req.doc_ids.as_deref(),
                    tenant_id: req.tenant_id.as_deref(),
                },
                REDRIVE_LETTERS_MAX,
                self.bugs.has(Bug::RedriveOverlaps),
            )
            .await?;
        let matched = rows.len();
        let mut eligible = Vec::new();
        let mut skipped = Vec::new();
        let mut fingerprint = serde_json::to_string(req).expect("request serializes");
        for c in rows {
            // The plan id changes whenever what the redrive would do changes.
            fingerprint.push_str(&format!(
                "|{}:{}:{:?}:{:?}:{}:{:?}",
                c.job_id,
                c.last_seen,
                c.latest_version,
                c.live_version,
                c.redriven,
                c.job_state_now
            ));
            let why = skip_reason(&c);
            match why {
                Some(reason) => skipped.push(SkippedItem {
                    job_id: c.job_id,
                    tenant_id: c.tenant_id,
                    doc_id: c.doc_id,
                    version: c.version,
                    reason,
                }),
                None => eligible.push(PlanItem {
                    job_id: c.job_id,
                    tenant_id: c.tenant_id,
                    doc_id: c.doc_id,
                    version: c.version,
                    failure_bucket: c.failure_bucket,
                }),
            }
        }
        let mut keys: Vec<&str> = eligible.iter().map(|e| e.doc_id.as_str()).collect();
        keys.sort();
        keys.dedup();
        let documents: Vec<String> = keys
            .into_iter()
            .map(|k| split_key(k).1.to_string())
            .collect();
        let canaries = eligible
            .iter()
            .take(req.canary_size)
            .map(|e| e.job_id.clone())
            .collect();
        Ok(Plan {
            plan_id: sha256_hex(fingerprint.as_bytes())[..32].to_string(),
            matched,
            eligible,
            skipped,
            documents,
            canaries,
        })
    }

    /// Executes a plan: records the redrive and its items, sends the
    /// canaries. Refused if the plan changed since the preflight (or was
    /// executed already).
    pub async fn redrive_execute(
        &self,
        req: &RedriveRequest,
        plan_id: &str,
    ) -> Result<Outcome<RedriveView>, PortError> {
        let plan = self.redrive_plan(req).await?;
        if plan.plan_id != plan_id {
            return Ok(Err(Refused::PlanChanged));
        }
        let now = self.clock.now_ms();
        // Derived from the plan: executing one plan twice collides on the
        // primary key instead of starting a second redrive.
        let redrive_id = format!("rd-{}", &plan_id[..24]);
        let items: Vec<NewItem> = plan
            .eligible
            .iter()
            .enumerate()
            .map(|(i, e)| NewItem {
                job_id: &e.job_id,
                doc_id: &e.doc_id,
                version: e.version,
                phase: if i < req.canary_size {
                    RedrivePhase::Canary
                } else {
                    RedrivePhase::Batch
                },
                seq: i,
                state: ItemState::Pending,
            })
            .collect();
        let params = serde_json::to_string(req).expect("request serializes");
        let created = json!({ "plan_id": plan_id, "eligible": plan.eligible.len(), "skipped": plan.skipped.len() });
        if !self
            .store
            .redrive_create(&redrive_id, plan_id, &params, now, &created, &items)
            .await?
        {
            return Ok(Err(Refused::PlanChanged));
        }
        self.redrive_advance(&redrive_id).await?;
        let view = self.redrive_view(&redrive_id).await?;
        Ok(view.ok_or(Refused::PlanChanged))
    }

    /// Moves a redrive on: settles the items whose jobs ended, checks the
    /// stop condition, sends the next batch. Safe to call any number of
    /// times (cron and polling both call it).
    pub async fn redrive_advance(&self, redrive_id: &str) -> Result<(), PortError> {
        let Some(r) = self.redrive_row(redrive_id).await? else {
            return Ok(());
        };
        if !r.state.is_open() {
            return Ok(());
        }
        let req: RedriveRequest = serde_json::from_str(&r.params).map_err(|_| {
            PortError::new(
                crate::core::failure::FailureBucket::Internal,
                "redrive_params",
            )
        })?;
        let now = self.clock.now_ms();
        let mut items = self.redrive_items(redrive_id).await?;
        self.settle_items(redrive_id, &mut items).await?;
        let in_flight = items.iter().any(|i| i.state == ItemState::Sent);
        let (canaries, rest): (Vec<&ItemRow>, Vec<&ItemRow>) =
            items.iter().partition(|i| i.phase == RedrivePhase::Canary);
        let failed_canaries = canaries
            .iter()
            .filter(|i| i.state == ItemState::Failed)
            .count();
        if failed_canaries > req.max_failed_canaries {
            return self
                .stop(
                    redrive_id,
                    now,
                    "canary_failed",
                    json!({ "failed_canaries": failed_canaries }),
                )
                .await;
        }
        let next = if r.state == RedriveState::Canary {
            self.after_canaries(redrive_id, &req, &canaries, &rest, in_flight, now)
                .await?
        } else {
            self.after_batch(redrive_id, &req, &rest, in_flight, now)
                .await?
        };
        match next {
            // Waiting for the items in flight, or stopped.
            None => Ok(()),
            Some(to_send) if to_send.is_empty() => {
                self.set_state(redrive_id, RedriveState::Completed, None, now)
                    .await?;
                self.audit(redrive_id, now, "completed", json!({})).await
            }
            Some(to_send) => self.send_items(redrive_id, to_send, now).await,
        }
    }

    /// Settles the items sent whose jobs reached a final state.
    async fn settle_items(&self, redrive_id: &str, items: &mut [ItemRow]) -> Result<(), PortError> {
        for it in items.iter_mut().filter(|i| i.state == ItemState::Sent) {
            let settled = match it.job_state {
                Some(JobState::Succeeded) => Some(ItemState::Succeeded),
                Some(JobState::Failed | JobState::Dead) => Some(ItemState::Failed),
                Some(JobState::Superseded) => Some(ItemState::Skipped),
                _ => None,
            };
            if let Some(s) = settled {
                self.set_item(
                    redrive_id,
                    &it.letter_job_id,
                    ItemState::Sent,
                    s,
                    None,
                    None,
                )
                .await?;
                it.state = s;
            }
        }
        Ok(())
    }

    /// The canary phase's next step: the canaries still pending, or once
    /// they all ended and one succeeded, the first batch (the redrive
    /// moves to `running`). `None`: wait, or stopped for lack of evidence.
    async fn after_canaries<'a>(
        &self,
        redrive_id: &str,
        req: &RedriveRequest,
        canaries: &[&'a ItemRow],
        rest: &[&'a ItemRow],
        in_flight: bool,
        now: i64,
    ) -> Result<Option<Vec<&'a ItemRow>>, PortError> {
        let pending: Vec<&ItemRow> = canaries
            .iter()
            .copied()
            .filter(|i| i.state == ItemState::Pending)
            .collect();
        if !pending.is_empty() {
            return Ok(Some(pending));
        }
        if in_flight {
            return Ok(None);
        }
        if !canaries.iter().any(|i| i.state == ItemState::Succeeded) {
            // Skipped canaries prove nothing: with no canary that ran
            // and succeeded, the batches are not sent.
            self.stop(
                redrive_id,
                now,
                "no_canary_evidence",
                json!({ "canaries": canaries.len() }),
            )
            .await?;
            return Ok(None);
        }
        self.set_state(redrive_id, RedriveState::Running, None, now)
            .await?;
        self.audit(
            redrive_id,
            now,
            "canaries_passed",
            json!({ "canaries": canaries.len() }),
        )
        .await?;
        Ok(Some(next_batch(rest, req.batch_size)))
    }

    /// The batch phase's next step: once the batch in flight ended, and
    /// unless its failure ratio is over the limit, the next batch. `None`:
    /// wait, or stopped.
    async fn after_batch<'a>(
        &self,
        redrive_id: &str,
        req: &RedriveRequest,
        rest: &[&'a ItemRow],
        in_flight: bool,
        now: i64,
    ) -> Result<Option<Vec<&'a ItemRow>>, PortError> {
        if in_flight {
            return Ok(None);
        }
        let done: Vec<&ItemRow> = rest
            .iter()
            .copied()
            .filter(|i| matches!(i.state, ItemState::Succeeded | ItemState::Failed))
            .collect();
        let failed = done.iter().filter(|i| i.state == ItemState::Failed).count();
        if !done.is_empty() && failed as f64 / done.len() as f64 > req.max_failure_ratio {
            self.stop(
                redrive_id,
                now,
                "failure_ratio",
                json!({ "failed": failed, "done": done.len() }),
            )
            .await?;
            return Ok(None);
        }
        Ok(Some(next_batch(rest, req.batch_size)))
    }

    /// Re-runs each item's letter (an item no longer re-runnable is
    /// skipped), and audits what was sent.
    async fn send_items(
        &self,
        redrive_id: &str,
        to_send: Vec<&ItemRow>,
        now: i64,
    ) -> Result<(), PortError> {
        let mut sent = 0;
        let phase = to_send.first().map_or(RedrivePhase::Batch, |i| i.phase);
        for it in to_send {
            let rerun = self.rerun_item(redrive_id, it).await?;
            if matches!(rerun, Rerun::Sent { .. }) {
                sent += 1;
            } else if rerun == Rerun::TenantMoving {
                // Its tenant is fenced for a move (or gone from this
                // shard): the item stays pending, and a later advance
                // re-runs it or, once the move's cleanup removed the
                // document here, skips it.
                continue;
            } else {
                // Not re-run: the version is no longer the latest (or
                // another advance sent the item: then it is not pending, and
                // this changes nothing).
                self.set_item(
                    redrive_id,
                    &it.letter_job_id,
                    ItemState::Pending,
                    ItemState::Skipped,
                    None,
                    None,
                )
                .await?;
            }
        }
        self.audit(
            redrive_id,
            now,
            "sent",
            json!({ "items": sent, "phase": phase }),
        )
        .await
    }

    /// Re-runs `version` of `doc_id` as a new version with the same content,
    /// if it is still the latest and not live; sends its job.
    pub async fn rerun_version(&self, doc_id: &str, version: u32) -> Result<Rerun, PortError> {
        self.rerun(doc_id, version, RerunOf::Latest).await
    }

    /// Re-runs the live `version` (its vectors are missing from the index)
    /// as a new version with the same content.
    pub async fn rerun_live_version(&self, doc_id: &str, version: u32) -> Result<Rerun, PortError> {
        self.rerun(doc_id, version, RerunOf::Live).await
    }

    /// Re-runs a redrive item's letter, and marks the item `sent` with its
    /// job, in one batch; not applicable if the item was no longer pending
    /// (another advance took it) or the version is no longer the latest.
    async fn rerun_item(&self, redrive_id: &str, it: &ItemRow) -> Result<Rerun, PortError> {
        if self.bugs.has(Bug::RedriveSendInTwoSteps) {
            let rerun = self.rerun(&it.doc_id, it.version, RerunOf::Latest).await?;
            if let Rerun::Sent { version, job_id } = &rerun {
                self.set_item(
                    redrive_id,
                    &it.letter_job_id,
                    ItemState::Pending,
                    ItemState::Sent,
                    Some(job_id),
                    Some(*version),
                )
                .await?;
            }
            return Ok(rerun);
        }
        self.rerun(
            &it.doc_id,
            it.version,
            RerunOf::RedriveItem {
                redrive_id,
                letter_job_id: &it.letter_job_id,
            },
        )
        .await
    }

    /// Re-runs `version` as a new version with the same content (see
    /// [`RerunOf`] for when it applies), then sends its job.
    async fn rerun(&self, doc_id: &str, version: u32, of: RerunOf<'_>) -> Result<Rerun, PortError> {
        let Some(doc) = DocKey::from_stored(doc_id) else {
            return Ok(Rerun::NotApplicable);
        };
        let now = self.clock.now_ms();
        let new_version = version + 1;
        // The kind follows the copied version; the job id is derived like intake's.
        let kind = if self.store.version_is_delete(doc_id, version).await? {
            "delete"
        } else {
            "index"
        };
        let new_job = job_id(&doc, new_version, kind, 0);
        match self.store.rerun(doc_id, version, now, &new_job, of).await {
            Ok(true) => {}
            Ok(false) => return Ok(Rerun::NotApplicable),
            Err(e) if e.code == "db_constraint" && self.tenant_moving(doc.tenant()).await? => {
                return Ok(Rerun::TenantMoving);
            }
            Err(e) => return Err(e),
        }
        let msg = JobMessage::new(new_job.clone(), doc_id.to_string(), new_version);
        if let Err(e) = self.queue.send_batch(&[msg]).await {
            // The job is queued in D1; cron's requeue sends it once stalled.
            log_event(
                "enqueue_deferred",
                json!({ "bucket": e.bucket.as_str(), "code": e.code, "jobs": 1 }),
            );
        }
        Ok(Rerun::Sent {
            version: new_version,
            job_id: new_job,
        })
    }

    /// Whether `tenant` takes no write on this shard now: fenced for a
    /// move, moved away, or moving in (what a re-run's guard refused).
    async fn tenant_moving(&self, tenant: &str) -> Result<bool, PortError> {
        let usage = self.store.tenant_usage(tenant, 0, 0).await?;
        Ok(usage
            .and_then(|u| u.move_state)
            .is_some_and(|m| m != TenantMoveState::Copying))
    }

    /// A redrive, its items and its audit trail.
    pub async fn redrive_view(&self, redrive_id: &str) -> Result<Option<RedriveView>, PortError> {
        let Some(r) = self.redrive_row(redrive_id).await? else {
            return Ok(None);
        };
        let items = self.redrive_items(redrive_id).await?;
        let audit = self.store.redrive_audit_list(redrive_id).await?;
        Ok(Some(RedriveView::new(r, items, audit)))
    }

    /// Advances every active redrive (cron). Returns how many it looked at.
    pub async fn advance_redrives(&self, limit: usize) -> Result<usize, PortError> {
        let ids = self.store.redrives_active(limit).await?;
        for id in &ids {
            self.redrive_advance(id).await?;
        }
        Ok(ids.len())
    }

    async fn redrive_row(&self, redrive_id: &str) -> Result<Option<RedriveRow>, PortError> {
        self.store.redrive_row(redrive_id).await
    }

    async fn redrive_items(&self, redrive_id: &str) -> Result<Vec<ItemRow>, PortError> {
        self.store.redrive_items(redrive_id).await
    }

    async fn set_item(
        &self,
        redrive_id: &str,
        letter: &str,
        from: ItemState,
        state: ItemState,
        job: Option<&str>,
        version: Option<u32>,
    ) -> Result<(), PortError> {
        self.store
            .redrive_item_set(redrive_id, letter, from, state, job, version)
            .await
    }

    async fn set_state(
        &self,
        redrive_id: &str,
        state: RedriveState,
        reason: Option<&str>,
        now: i64,
    ) -> Result<(), PortError> {
        self.store
            .redrive_set_state(redrive_id, state, reason, now)
            .await
    }

    async fn stop(
        &self,
        redrive_id: &str,
        now: i64,
        reason: &str,
        detail: Value,
    ) -> Result<(), PortError> {
        self.set_state(redrive_id, RedriveState::Stopped, Some(reason), now)
            .await?;
        self.audit(
            redrive_id,
            now,
            "stopped",
            json!({ "reason": reason, "detail": detail }),
        )
        .await
    }

    async fn audit(
        &self,
        redrive_id: &str,
        now: i64,
        event: &str,
        detail: Value,
    ) -> Result<(), PortError> {
        self.store
            .redrive_audit(redrive_id, now, event, &detail)
            .await
    }
}

/// The next `size` pending items of the batch phase.
fn next_batch<'a>(rest: &[&'a ItemRow], size: usize) -> Vec<&'a ItemRow> {
    rest.iter()
        .copied()
        .filter(|i| i.state == ItemState::Pending)
        .take(size)
        .collect()
}

/// Why a redrive skips a letter (see [`SkippedItem::reason`]); `None`: it
/// is eligible.
fn skip_reason(c: &Candidate) -> Option<&'static str> {
    let in_flight = c.job_state_now.is_some_and(JobState::is_open);
    match (c.latest_version, c.live_version) {
        _ if c.redriven > 0 => Some("already_redriven"),
        _ if in_flight => Some("in_flight"),
        (None, _) => Some("document_missing"),
        (Some(l), _) if l > c.version => Some("superseded"),
        (_, Some(live)) if live >= c.version => Some("already_live"),
        _ => None,
    }
}
