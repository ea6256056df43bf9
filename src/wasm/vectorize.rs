//! [`VectorIndex`] on Cloudflare Vectorize (the V2 binding).
//!
//! workers-rs 0.8 has no Vectorize type, so the binding's methods are
//! declared here. What crosses into JS is built as plain objects (vector
//! values as a `Float32Array`, metadata and filters through `JSON.parse`):
//! a JS `Map`, which `serde_wasm_bindgen::to_value` makes of a Rust map, is
//! serialized by the binding as `{}` and its content silently lost.
//!
//! Every call is bounded by the configured limits and refused whole above
//! them (`IndexRejected`); callers batch. Failures are classified from the
//! error's text into a failure bucket and a static code; the text itself is
//! never logged or returned.

use super::js_error_text;
use crate::adapters::IndexLimits;
use crate::config::VectorMetric;
use crate::core::failure::FailureBucket;
use crate::ports::{
    MetadataFilter, PortError, VectorIndex, VectorMatch, VectorMetadata, VectorRecord,
};
use js_sys::{Array, Float32Array, Object, Promise, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

/// Vectorize's per-vector metadata ceiling.
pub const METADATA_BYTES_MAX: usize = 10 * 1024;

#[wasm_bindgen]
extern "C" {
    /// The `[[vectorize]]` binding (`VectorizeIndexImpl` in workerd).
    #[derive(Clone, Debug)]
    pub type VectorizeBinding;

    #[wasm_bindgen(method, catch)]
    fn upsert(this: &VectorizeBinding, vectors: &Array) -> Result<Promise, JsValue>;

    #[wasm_bindgen(method, catch, js_name = deleteByIds)]
    fn delete_by_ids(this: &VectorizeBinding, ids: &Array) -> Result<Promise, JsValue>;

    #[wasm_bindgen(method, catch, js_name = getByIds)]
    fn get_by_ids(this: &VectorizeBinding, ids: &Array) -> Result<Promise, JsValue>;

    #[wasm_bindgen(method, catch)]
    fn query(
        this: &VectorizeBinding,
        vector: &Float32Array,
        options: &Object,
    ) -> Result<Promise, JsValue>;

    #[wasm_bindgen(method, catch)]
    fn describe(this: &VectorizeBinding) -> Result<Promise, JsValue>;
}

/// Checks the binding by shape, not by class name: the production class
/// (`VectorizeIndexImpl`) and a test double differ only in name.
impl worker::EnvBinding for VectorizeBinding {
    const TYPE_NAME: &'static str = "VectorizeIndexImpl";

    fn get(val: JsValue) -> worker::Result<Self> {
        if has_methods(
            &val,
            &["upsert", "query", "getByIds", "deleteByIds", "describe"],
        ) {
            Ok(val.unchecked_into())
        } else {
            Err("the binding is not a Vectorize index".into())
        }
    }
}

/// Whether `val` is an object with a function under each name.
pub(super) fn has_methods(val: &JsValue, names: &[&str]) -> bool {
    val.is_object()
        && names
            .iter()
            .all(|n| Reflect::get(val, &JsValue::from_str(n)).is_ok_and(|f| f.is_function()))
}

/// The Vectorize adapter; every call is checked against `limits`
/// (from [`crate::config::Config`]).
pub struct VectorizeIndex {
    pub binding: VectorizeBinding,
    pub limits: IndexLimits,
}

/// What `describe()` reports about the index. The V2 binding answers
/// `{dimensions, vectorCount, processedUpTo…}` (no metric); the legacy one
/// `{config: {dimensions, metric}, vectorsCount}`. Both are read.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexInfo {
    pub dimensions: Option<u64>,
    pub metric: Option<String>,
}

impl IndexInfo {
    /// Compares the index with the configuration: `Err` carries the static
    /// code of the first disagreement. An unreported metric is not a
    /// disagreement (the V2 binding does not report it).
    pub fn verify(&self, dimensions: usize, metric: VectorMetric) -> Result<(), &'static str> {
        match self.dimensions {
            None => return Err("index_dimensions_unknown"),
            Some(d) if d != dimensions as u64 => return Err("index_dimensions_mismatch"),
            Some(_) => {}
        }
        match &self.metric {
            Some(m)
                if VectorMetric::parse(&m.to_ascii_lowercase().replace('_', "-"))
                    != Some(metric) =>
            {
                Err("index_metric_mismatch")
            }
            _ => Ok(()),
        }
    }
}

fn rejected(code: &'static str) -> PortError {
    PortError::new(FailureBucket::IndexRejected, code)
}

/// Classifies a failed Vectorize call. The binding throws
/// `Error("<OPERATION>_ERROR (code = <n>): <text>")` for an answer with an
/// error body, `"<OPERATION>_ERROR: Status + <status>"` otherwise.
pub fn classify(text: &str) -> PortError {
    let t = text.to_ascii_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| t.contains(n));
    if has(&[
        "too many requests",
        "rate limit",
        "ratelimit",
        "rate-limit",
        "status + 429",
        "throttl",
    ]) {
        PortError::new(FailureBucket::IndexRateLimited, "vectorize_rate_limited")
    } else if has(&["dimension"]) {
        // The pipeline checks every vector's length against the configured
        // dimensions before upserting: the index itself disagrees.
        PortError::new(
            FailureBucket::IndexMisconfigured,
            "index_dimensions_mismatch",
        )
    } else if has(&[
        "index not found",
        "no such index",
        "index does not exist",
        "status + 404",
    ]) {
        PortError::new(FailureBucket::IndexMisconfigured, "index_not_found")
    } else if has(&["timeout", "timed out", "deadline"]) {
        PortError::new(FailureBucket::IndexUnavailable, "vectorize_timeout")
    } else if has(&[
        "status + 5",
        "unavailable",
        "internal",
        "network",
        "connection",
        "overloaded",
        "try again",
        "failed to parse body",
    ]) {
        PortError::new(FailureBucket::IndexUnavailable, "vectorize_unavailable")
    } else if has(&[
        "(code = 4",
        "status + 4",
        "invalid",
        "too large",
        "too many",
        "exceed",
        "must ",
        "bad request",
    ]) {
        rejected("vectorize_rejected")
    } else {
        // Unknown failures are retried (bounded by JOB_ATTEMPTS_MAX) rather
        // than failing a job for good on a guess.
        PortError::new(FailureBucket::IndexUnavailable, "vectorize_error")
    }
}

async fn call(promise: Result<Promise, JsValue>) -> Result<JsValue, PortError> {
    let result = match promise {
        Ok(p) => JsFuture::from(p).await,
        Err(e) => Err(e),
    };
    result.map_err(|e| classify(&js_error_text(&e)))
}

fn shape_error() -> PortError {
    PortError::new(FailureBucket::IndexUnavailable, "vectorize_response_shape")
}

/// Metadata keys Vectorize refuses: empty, with `.` or `"`, or starting with `$`.
fn key_ok(key: &str) -> bool {
    !key.is_empty() && !key.starts_with('$') && !key.contains(['.', '"'])
}

/// A plain JS object from JSON text (never a `Map`).
fn plain_object(json: &str) -> Result<JsValue, PortError> {
    js_sys::JSON::parse(json)
        .map_err(|_| PortError::new(FailureBucket::Internal, "metadata_encoding"))
}

fn string_array(ids: &[String]) -> Array {
    let arr = Array::new_with_length(ids.len() as u32);
    for (i, id) in ids.iter().enumerate() {
        arr.set(i as u32, JsValue::from_str(id));
    }
    arr
}

fn set(target: &Object, key: &str, value: &JsValue) {
    // Setting a property on a fresh plain object cannot fail.
    let _ = Reflect::set(target, &JsValue::from_str(key), value);
}

impl VectorizeIndex {
    fn vector_object(&self, v: &VectorRecord) -> Result<Object, PortError> {
        if v.id.is_empty() || v.id.len() > self.limits.id_bytes_max {
            return Err(rejected("vector_id_length"));
        }
        if v.values.len() != self.limits.dimensions {
            return Err(rejected("dimensions"));
        }
        if v.values.iter().any(|x| !x.is_finite()) {
            return Err(rejected("vector_values"));
        }
        if !v.metadata.keys().all(|k| key_ok(k)) {
            return Err(rejected("metadata_key"));
        }
        let metadata =
            serde_json::to_string(&v.metadata).map_err(|_| rejected("metadata_encoding"))?;
        if metadata.len() > METADATA_BYTES_MAX {
            return Err(rejected("metadata_too_large"));
        }
        let o = Object::new();
        set(&o, "id", &JsValue::from_str(&v.id));
        set(&o, "values", &Float32Array::from(v.values.as_slice()));
        set(&o, "metadata", &plain_object(&metadata)?);
        if !v.namespace.is_empty() {
            set(&o, "namespace", &JsValue::from_str(&v.namespace));
        }
        Ok(o)
    }

    /// Reads the index's dimensions and (when reported) metric.
    pub async fn describe(&self) -> Result<IndexInfo, PortError> {
        let info = call(self.binding.describe()).await?;
        if !info.is_object() {
            return Err(shape_error());
        }
        let get = |obj: &JsValue, key: &str| {
            Reflect::get(obj, &JsValue::from_str(key))
                .ok()
                .filter(|v| !v.is_undefined() && !v.is_null())
        };
        let config = get(&info, "config");
        let field =
            |key: &str| get(&info, key).or_else(|| config.as_ref().and_then(|c| get(c, key)));
        let dimensions = field("dimensions")
            .and_then(|d| d.as_f64())
            .filter(|d| d.fract() == 0.0 && *d >= 0.0)
            .map(|d| d as u64);
        let metric = field("metric").and_then(|m| m.as_string());
        Ok(IndexInfo { dimensions, metric })
    }
}

fn field(obj: &JsValue, key: &str) -> JsValue {
    Reflect::get(obj, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}

/// An array's items, or a shape error.
fn items(v: &JsValue) -> Result<Array, PortError> {
    if Array::is_array(v) {
        Ok(Array::from(v))
    } else {
        Err(shape_error())
    }
}

/// `{matches: [{id, score}]}`.
fn read_matches(answer: &JsValue) -> Result<Vec<VectorMatch>, PortError> {
    items(&field(answer, "matches"))?
        .iter()
        .map(
            |m| match (field(&m, "id").as_string(), field(&m, "score").as_f64()) {
                (Some(id), Some(score)) => Ok(VectorMatch {
                    id,
                    score: score as f32,
                }),
                _ => Err(shape_error()),
            },
        )
        .collect()
}

/// `[{id, values, metadata}]`; metadata is read back through JSON.
fn read_vectors(answer: &JsValue) -> Result<Vec<VectorRecord>, PortError> {
    items(answer)?
        .iter()
        .map(|v| {
            let id = field(&v, "id").as_string().ok_or_else(shape_error)?;
            let values = field(&v, "values");
            let values = if Array::is_array(&values) || values.is_instance_of::<Float32Array>() {
                Float32Array::new(&values).to_vec()
            } else {
                Vec::new()
            };
            let metadata = field(&v, "metadata");
            let metadata: VectorMetadata = if metadata.is_object() {
                let json = js_sys::JSON::stringify(&metadata).map_err(|_| shape_error())?;
                serde_json::from_str(&String::from(json)).map_err(|_| shape_error())?
            } else {
                VectorMetadata::new()
            };
            let namespace = field(&v, "namespace").as_string().unwrap_or_default();
            Ok(VectorRecord {
                id,
                namespace,
                values,
                metadata,
            })
        })
        .collect()
}

impl VectorIndex for VectorizeIndex {
    async fn upsert(&self, vectors: &[VectorRecord]) -> Result<(), PortError> {
        if vectors.len() > self.limits.upsert_batch_max {
            return Err(rejected("upsert_batch_too_large"));
        }
        if vectors.is_empty() {
            return Ok(());
        }
        let arr = Array::new_with_length(vectors.len() as u32);
        for (i, v) in vectors.iter().enumerate() {
            arr.set(i as u32, self.vector_object(v)?.into());
        }
        // The answer is `{mutationId}`: the write becomes visible later.
        call(self.binding.upsert(&arr)).await.map(|_| ())
    }

    async fn delete_by_ids(&self, ids: &[String]) -> Result<(), PortError> {
        if ids.len() > self.limits.delete_batch_max {
            return Err(rejected("delete_batch_too_large"));
        }
        if ids.is_empty() {
            return Ok(());
        }
        call(self.binding.delete_by_ids(&string_array(ids)))
            .await
            .map(|_| ())
    }

    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        namespace: &str,
        filter: &MetadataFilter,
    ) -> Result<Vec<VectorMatch>, PortError> {
        if top_k == 0 || top_k > self.limits.top_k_max {
            return Err(rejected("top_k"));
        }
        if vector.len() != self.limits.dimensions {
            return Err(rejected("dimensions"));
        }
        let options = Object::new();
        set(&options, "topK", &JsValue::from_f64(top_k as f64));
        set(&options, "returnValues", &JsValue::FALSE);
        set(&options, "returnMetadata", &JsValue::from_str("none"));
        set(&options, "namespace", &JsValue::from_str(namespace));
        if !filter.is_empty() {
            if !filter.keys().all(|k| key_ok(k))
                || filter.values().any(|v| v.is_object() || v.is_array())
            {
                return Err(rejected("filter_shape"));
            }
            // Equality on every key: Vectorize's implicit `$eq`.
            let json = serde_json::to_string(filter).map_err(|_| rejected("filter_shape"))?;
            if json.len() > self.limits.filter_bytes_max {
                return Err(rejected("filter_too_large"));
            }
            set(&options, "filter", &plain_object(&json)?);
        }
        let answer = call(self.binding.query(&Float32Array::from(vector), &options)).await?;
        read_matches(&answer)
    }

    async fn get_by_ids(&self, ids: &[String]) -> Result<Vec<VectorRecord>, PortError> {
        if ids.len() > self.limits.get_batch_max {
            return Err(rejected("get_batch_too_large"));
        }
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let answer = call(self.binding.get_by_ids(&string_array(ids))).await?;
        read_vectors(&answer)
    }
}
