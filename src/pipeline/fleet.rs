//! Shards: every shard's pipeline, and what spans them. A shard is one
//! ledger and one vector index; shard 0 also holds the directory
//! (migration 0032), which places each tenant on a shard and each token
//! with its tenant. A tenant's own rows (its tenants row, tokens,
//! documents, jobs, letters) live on its shard, so a request reaches that
//! shard only (docs/ARCHITECTURE.md, "Shards and the directory").
//!
//! With one shard nothing is looked up: every tenant is on shard 0, and a
//! deployment of one shard does what it did before shards.

use super::tenants::{NewToken, TenantView, TokenView};
use super::{log_event, Outcome, Pipeline, Refused};
use crate::core::credentials::{self, Scopes};
use crate::core::failure::FailureBucket;
use crate::core::ids::TenantId;
use crate::core::shards::{place, PlacementRefused, PlacementRequest, ShardId, ShardLoad};
use crate::ports::{Clock, Database, Embedder, JobQueue, PortError, VectorIndex};
use crate::store::{NewPlacement, Quotas};
use serde::Serialize;
use serde_json::json;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// The pipelines of a deployment's shards, as the API and the entry
/// points reach them. A single [`Pipeline`] is a deployment of one shard.
pub trait Shards {
    type D: Database;
    type V: VectorIndex;
    type E: Embedder;
    type Q: JobQueue;
    type C: Clock;
    /// How many shards there are: 0 up to `count() - 1`.
    fn count(&self) -> u16;
    /// Shard `id`'s pipeline, if the deployment has it.
    fn shard(&self, id: ShardId) -> Option<&ShardPipeline<Self>>;
    /// Shard 0's pipeline: the directory's ledger.
    fn control(&self) -> &ShardPipeline<Self>;
    /// What the directory said lately, if this deployment keeps it.
    fn cache(&self) -> Option<&DirectoryCache> {
        None
    }
}

/// What the directory said of tokens and tenants (their shards), kept for
/// `DIRECTORY_CACHE_SECONDS` (the Worker keeps one per isolate). Only
/// answers found are kept: a token minted or a tenant placed a moment
/// later is found at once. A placement never changes while it is kept,
/// and the shard checks the token itself on every request (a revoked one
/// is refused there).
#[derive(Debug, Default)]
pub struct DirectoryCache {
    entries: RefCell<HashMap<String, (String, ShardId, i64)>>,
}

impl DirectoryCache {
    fn get(&self, key: &str, now_ms: i64) -> Option<(String, ShardId)> {
        let entries = self.entries.borrow();
        let (tenant, shard, until) = entries.get(key)?;
        (now_ms < *until).then(|| (tenant.clone(), *shard))
    }

    fn forget(&self, key: &str) {
        self.entries.borrow_mut().remove(key);
    }

    fn put(&self, key: String, found: (String, ShardId), until: i64, entries_max: usize) {
        let mut entries = self.entries.borrow_mut();
        if entries.len() >= entries_max {
            entries.clear();
        }
        entries.insert(key, (found.0, found.1, until));
    }
}

/// Reads `key` through `s`'s cache: `lookup` on a miss, its answer kept
/// if it found one.
async fn cached<S: Shards>(
    s: &S,
    key: String,
    lookup: impl std::future::Future<Output = Result<Option<(String, ShardId)>, PortError>>,
) -> Result<Option<(String, ShardId)>, PortError> {
    let control = s.control();
    let ttl_ms = i64::from(control.cfg.directory_cache_seconds) * 1000;
    let now = control.clock.now_ms();
    let cache = s.cache().filter(|_| ttl_ms > 0);
    if let Some(hit) = cache.and_then(|c| c.get(&key, now)) {
        return Ok(Some(hit));
    }
    let found = lookup.await?;
    if let (Some(c), Some(f)) = (cache, &found) {
        c.put(
            key,
            f.clone(),
            now + ttl_ms,
            control.cfg.directory_cache_entries,
        );
    }
    Ok(found)
}

/// The pipeline type of a [`Shards`].
pub type ShardPipeline<S> = Pipeline<
    <S as Shards>::D,
    <S as Shards>::V,
    <S as Shards>::E,
    <S as Shards>::Q,
    <S as Shards>::C,
>;

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Shards
    for Pipeline<D, V, E, Q, C>
{
    type D = D;
    type V = V;
    type E = E;
    type Q = Q;
    type C = C;
    fn count(&self) -> u16 {
        1
    }
    fn shard(&self, id: ShardId) -> Option<&Self> {
        (id == ShardId::CONTROL).then_some(self)
    }
    fn control(&self) -> &Self {
        self
    }
}

/// Several shards' pipelines, shard 0 first.
pub struct Fleet<D, V, E, Q, C> {
    shards: Vec<Pipeline<D, V, E, Q, C>>,
    cache: Option<Rc<DirectoryCache>>,
}

impl<D, V, E, Q, C> Fleet<D, V, E, Q, C> {
    /// The deployment of `control` (shard 0) and `others` (shards 1, 2,
    /// ...): each pipeline is told its number.
    pub fn new(control: Pipeline<D, V, E, Q, C>, others: Vec<Pipeline<D, V, E, Q, C>>) -> Self {
        let mut shards = vec![control];
        shards.extend(others);
        for (n, p) in shards.iter_mut().enumerate() {
            p.shard = ShardId(u16::try_from(n).unwrap_or(u16::MAX));
        }
        Fleet {
            shards,
            cache: None,
        }
    }

    /// This deployment, keeping what the directory says in `cache`.
    pub fn with_cache(mut self, cache: Rc<DirectoryCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Every shard's pipeline, in order (the entry points' loop over them).
    pub fn all(&self) -> &[Pipeline<D, V, E, Q, C>] {
        &self.shards
    }

    pub fn all_mut(&mut self) -> &mut [Pipeline<D, V, E, Q, C>] {
        &mut self.shards
    }
}

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Shards
    for Fleet<D, V, E, Q, C>
{
    type D = D;
    type V = V;
    type E = E;
    type Q = Q;
    type C = C;
    fn count(&self) -> u16 {
        u16::try_from(self.shards.len()).unwrap_or(u16::MAX)
    }
    fn shard(&self, id: ShardId) -> Option<&Pipeline<D, V, E, Q, C>> {
        self.shards.get(id.index())
    }
    fn control(&self) -> &Pipeline<D, V, E, Q, C> {
        // `new` always puts shard 0 first.
        &self.shards[0]
    }
    fn cache(&self) -> Option<&DirectoryCache> {
        self.cache.as_deref()
    }
}

/// A directory entry that names a shard the deployment does not declare
/// (`SHARDS` lowered, a binding removed): the tenant's requests fail
/// until the binding is back, rather than reach another shard.
fn missing() -> PortError {
    PortError::new(FailureBucket::ConfigInvalid, "shard_missing")
}

/// Shard `id`'s pipeline, or the configuration error.
pub fn home<S: Shards>(s: &S, id: ShardId) -> Result<&ShardPipeline<S>, PortError> {
    s.shard(id).ok_or_else(missing)
}

/// The shard that holds `tenant` (a tenant the directory does not place
/// was there before shards: shard 0).
pub async fn tenant_shard<S: Shards>(s: &S, tenant: &TenantId) -> Result<ShardId, PortError> {
    if s.count() == 1 {
        return Ok(ShardId::CONTROL);
    }
    let store = &s.control().store;
    let lookup = async {
        let placed = store.placement_of(tenant.as_str()).await?;
        Ok(placed.map(|shard| (tenant.as_str().to_string(), shard)))
    };
    let placed = cached(s, format!("tenant:{}", tenant.as_str()), lookup).await?;
    Ok(placed.map_or(ShardId::CONTROL, |(_, shard)| shard))
}

/// The shard that holds `tenant`, read from the directory itself (not the
/// cache): what a request of a tenant fenced for its move asks, since a
/// cached placement may predate the switch.
pub async fn tenant_shard_uncached<S: Shards>(
    s: &S,
    tenant: &TenantId,
) -> Result<ShardId, PortError> {
    if s.count() == 1 {
        return Ok(ShardId::CONTROL);
    }
    let placed = s.control().store.placement_of(tenant.as_str()).await?;
    Ok(placed.unwrap_or(ShardId::CONTROL))
}

/// Drops what the cache holds of `tenant` and of `bearer` (its token):
/// a shard said the tenant moved, so the next lookup reads the directory.
pub fn forget<S: Shards>(s: &S, tenant: &TenantId, bearer: Option<&str>) {
    let Some(cache) = s.cache() else { return };
    cache.forget(&format!("tenant:{}", tenant.as_str()));
    if let Some(token_id) = bearer.and_then(credentials::token_id_of) {
        cache.forget(&format!("token:{token_id}"));
    }
}

/// The shard that can check `token` (a tenant token), and the tenant the
/// directory says it belongs to; `None`: the directory has no such token.
pub async fn token_shard<S: Shards>(
    s: &S,
    token: &str,
) -> Result<Option<(String, ShardId)>, PortError> {
    let Some(token_id) = credentials::token_id_of(token) else {
        return Ok(None);
    };
    if s.count() == 1 {
        return Ok(Some((String::new(), ShardId::CONTROL)));
    }
    let store = &s.control().store;
    let lookup = async {
        let row = store.token_placement(token_id).await?;
        Ok(row.map(|r| (r.tenant_id, ShardId(r.shard))))
    };
    cached(s, format!("token:{token_id}"), lookup).await
}

/// What placement knows of every shard: its size (as its database says),
/// the tenants the directory places on it, and whether it is dedicated.
pub async fn shard_loads<S: Shards>(s: &S) -> Result<Vec<ShardLoad>, PortError> {
    let control = &s.control().store;
    let dedicated = control.dedicated_shards().await?;
    let mut loads = Vec::with_capacity(usize::from(s.count()));
    for n in 0..s.count() {
        let shard = ShardId(n);
        let p = home(s, shard)?;
        loads.push(ShardLoad {
            shard,
            size_bytes: p.store.size_bytes().await.ok(),
            tenants: control.shard_tenants(shard).await?,
            dedicated: dedicated.iter().any(|d| d.shard == n),
        });
    }
    Ok(loads)
}

fn placement_refused(r: PlacementRefused) -> Refused {
    match r {
        PlacementRefused::NoShardAvailable => Refused::NoShardAvailable,
        PlacementRefused::ShardDedicated => Refused::ShardDedicated,
        PlacementRefused::ShardNotEmpty => Refused::ShardNotEmpty,
    }
}

/// Creates a tenant: placed in the directory first (the policy's shard,
/// or the operator's pin), then created on its shard. A creation that
/// stopped between the two is completed by the next one of that ID.
pub async fn create_tenant<S: Shards>(
    s: &S,
    tenant: &TenantId,
    quotas: &Quotas,
    request: PlacementRequest,
) -> Result<Outcome<TenantView>, PortError> {
    let control = s.control();
    let shard = match control.store.placement_of(tenant.as_str()).await? {
        Some(shard) => shard,
        None => match place_new(s, tenant, request).await? {
            Ok(shard) => shard,
            Err(refused) => return Ok(Err(refused)),
        },
    };
    home(s, shard)?.create_tenant(tenant, quotas).await
}

/// Places a tenant the directory does not hold yet.
async fn place_new<S: Shards>(
    s: &S,
    tenant: &TenantId,
    request: PlacementRequest,
) -> Result<Outcome<ShardId>, PortError> {
    let control = s.control();
    let cfg = &control.cfg;
    let loads = shard_loads(s).await?;
    let shard = match place(request, &loads, cfg.shard_full_bytes) {
        Ok(shard) => shard,
        Err(r) => return Ok(Err(placement_refused(r))),
    };
    let placement = NewPlacement {
        tenant_id: tenant.as_str(),
        shard,
        dedicated: matches!(
            request,
            PlacementRequest::Pinned {
                dedicated: true,
                ..
            }
        ),
        tenants_max: cfg.tenants_max,
        now: control.clock.now_ms(),
    };
    match control.store.place_tenant(&placement).await {
        Ok(true) => {}
        Ok(false) => {
            return Ok(Err(Refused::TenantLimit {
                max: cfg.tenants_max,
            }))
        }
        // Another placement won meanwhile: of this tenant (then it is
        // where that one put it), or of the shard (then say why).
        Err(e) if e.code == "db_constraint" => {
            if let Some(placed) = control.store.placement_of(tenant.as_str()).await? {
                return Ok(Ok(placed));
            }
            let loads = shard_loads(s).await?;
            let why = place(request, &loads, cfg.shard_full_bytes)
                .err()
                .unwrap_or(PlacementRefused::ShardDedicated);
            return Ok(Err(placement_refused(why)));
        }
        Err(e) => return Err(e),
    }
    log_event(
        "tenant_placed",
        json!({ "tenant_id": tenant.as_str(), "shard": shard.0, "dedicated": placement.dedicated }),
    );
    Ok(Ok(shard))
}

/// Mints a token on the tenant's shard, then records it in the directory.
/// If the directory cannot record it, the token is revoked again (no
/// token is handed out that no request could use).
pub async fn mint_token<S: Shards>(
    s: &S,
    tenant: &TenantId,
    scopes: &Scopes,
    entropy: &[u8; 32],
) -> Result<Outcome<NewToken>, PortError> {
    // The directory itself (an operator's action follows a move at once).
    let p = home(s, tenant_shard_uncached(s, tenant).await?)?;
    let minted = match p.mint_token(tenant, scopes, entropy).await? {
        Ok(t) => t,
        Err(refused) => return Ok(Err(refused)),
    };
    let registered = s
        .control()
        .store
        .register_token(&minted.token_id, tenant.as_str())
        .await;
    if let Err(e) = registered {
        // Unregistered, the token reaches nothing (no request finds its
        // shard); revoked, it is not listed as live either.
        if let Err(r) = p.revoke_token(tenant, &minted.token_id).await {
            log_event(
                "token_unregistered",
                json!({ "tenant_id": tenant.as_str(), "token_id": minted.token_id, "bucket": r.bucket.as_str(), "code": r.code }),
            );
        }
        return Err(e);
    }
    Ok(Ok(minted))
}

/// Revokes a token on the tenant's shard, then removes it from the
/// directory (a revoke repeated after a crash between the two removes it).
pub async fn revoke_token<S: Shards>(
    s: &S,
    tenant: &TenantId,
    token_id: &str,
) -> Result<Outcome<TokenView>, PortError> {
    let p = home(s, tenant_shard_uncached(s, tenant).await?)?;
    let revoked = p.revoke_token(tenant, token_id).await?;
    if revoked.is_ok() {
        s.control()
            .store
            .forget_token(token_id, tenant.as_str())
            .await?;
    }
    Ok(revoked)
}

/// Tenants after `cursor` in ID order, at most `limit`, each read on its
/// shard: the directory's page, then one read per shard it names.
pub async fn tenants_page<S: Shards>(
    s: &S,
    cursor: &str,
    limit: usize,
) -> Result<Vec<TenantView>, PortError> {
    if s.count() == 1 {
        return s.control().tenants(cursor, limit).await;
    }
    let page = s.control().store.placements_page(cursor, limit).await?;
    let mut by_shard: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    for row in page {
        by_shard.entry(row.shard).or_default().push(row.tenant_id);
    }
    let mut out = Vec::new();
    for (shard, ids) in by_shard {
        let p = home(s, ShardId(shard))?;
        out.extend(p.tenants_by_ids(&ids).await?);
    }
    out.sort_by(|a, b| a.tenant_id.cmp(&b.tenant_id));
    Ok(out)
}

/// A shard as the operator sees it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ShardView {
    pub shard: u16,
    /// Its D1 database's size in bytes (`null`: it could not say).
    pub size_bytes: Option<u64>,
    /// Tenants the directory places on it.
    pub tenants: u64,
    /// The tenant it is dedicated to, if it is.
    pub dedicated_to: Option<String>,
    /// Whether the placement policy puts new tenants on it.
    pub takes_new_tenants: bool,
}

/// Every shard, with its size, tenants and dedication.
pub async fn shards_view<S: Shards>(s: &S) -> Result<Vec<ShardView>, PortError> {
    let full = s.control().cfg.shard_full_bytes;
    let dedicated = s.control().store.dedicated_shards().await?;
    let loads = shard_loads(s).await?;
    Ok(loads
        .into_iter()
        .map(|l| ShardView {
            shard: l.shard.0,
            size_bytes: l.size_bytes,
            tenants: l.tenants,
            dedicated_to: dedicated
                .iter()
                .find(|d| d.shard == l.shard.0)
                .map(|d| d.tenant_id.clone()),
            takes_new_tenants: !l.dedicated && l.size_bytes.is_some_and(|b| b < full),
        })
        .collect())
}
