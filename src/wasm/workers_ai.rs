//! [`Embedder`] on Workers AI (the `[ai]` binding).
//!
//! The binding's `run(model, inputs)` is declared here rather than used
//! through `worker::Ai`: that type serializes its input with
//! `serde_wasm_bindgen::to_value` and insists on a binding class named `Ai`.
//! Each call names its model (the generation's, `EmbedModel`), so one Worker
//! writes and searches generations of several models. The input is a plain
//! object `{text: [...], pooling}`; the answer must be
//! `{shape: [n, dims], data: number[][]}` with `n` the number of texts and
//! `dims` the model's dimensions, or the call is `EmbedRejected`.

use super::js_error_text;
use super::vectorize::has_methods;
use crate::core::failure::FailureBucket;
use crate::core::index_config::EmbedModel;
use crate::core::local_embed::EMBEDDER_ID;
use crate::ports::{Embedder, PortError};
use js_sys::{Array, Float32Array, Object, Promise, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

#[wasm_bindgen]
extern "C" {
    /// The `[ai]` binding (class `Ai` in workerd).
    #[derive(Clone, Debug)]
    pub type AiBinding;

    #[wasm_bindgen(method, catch)]
    fn run(this: &AiBinding, model: &str, inputs: &Object) -> Result<Promise, JsValue>;
}

/// Checks the binding by shape (a `run` method), not by class name.
impl worker::EnvBinding for AiBinding {
    const TYPE_NAME: &'static str = "Ai";

    fn get(val: JsValue) -> worker::Result<Self> {
        if has_methods(&val, &["run"]) {
            Ok(val.unchecked_into())
        } else {
            Err("the binding is not a Workers AI binding".into())
        }
    }
}

/// The Workers AI embedder: each call runs the model it is given (a
/// generation's), with its pooling, and checks its dimensions.
pub struct WorkersAiEmbedder {
    pub binding: AiBinding,
    /// Texts per call (Workers AI embedding models: 100).
    pub batch_size_max: usize,
}

fn rejected(code: &'static str) -> PortError {
    PortError::new(FailureBucket::EmbedRejected, code)
}

/// Classifies a failed Workers AI call. The binding throws
/// `InferenceUpstreamError("<internal code>: <description>")`; the codes are
/// those of the Workers AI error table (3036 and 3040 are 429s, 3007/3008
/// 408s, 5007 and 3042 unknown models, the other 3xxx/5xxx 4xx refusals).
pub fn classify(text: &str) -> PortError {
    let t = text.to_ascii_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| t.contains(n));
    if has(&[
        "3036",
        "3040",
        "too many requests",
        "rate limit",
        "capacity",
        "neurons",
    ]) {
        PortError::new(FailureBucket::EmbedRateLimited, "workers_ai_rate_limited")
    } else if has(&["5007", "3042", "no such model", "model name is invalid"]) {
        // A configuration problem: retried (a deploy fixes it), not failed.
        PortError::new(FailureBucket::ConfigInvalid, "embedding_model_unknown")
    } else if has(&["3007", "3008", "timeout", "timed out", "aborted"]) {
        PortError::new(FailureBucket::EmbedUnavailable, "workers_ai_timeout")
    } else if has(&["3003", "3006", "5004", "5006"]) {
        rejected("workers_ai_rejected")
    } else if has(&[
        "unavailable",
        "internal",
        "bad gateway",
        "network",
        "connection",
        "overloaded",
        "try again",
    ]) {
        PortError::new(FailureBucket::EmbedUnavailable, "workers_ai_unavailable")
    } else if has(&[
        "invalid",
        "too large",
        "too long",
        "required",
        "must ",
        "bad request",
    ]) {
        rejected("workers_ai_rejected")
    } else {
        // Unknown failures are retried (bounded by JOB_ATTEMPTS_MAX).
        PortError::new(FailureBucket::EmbedUnavailable, "workers_ai_error")
    }
}

/// Reads `{shape: [n, dims], data: number[][]}`, checking it against what
/// was asked. Rows are copied through a `Float32Array`, one copy per row.
fn read_output(out: &JsValue, n: usize, dims: usize) -> Result<Vec<Vec<f32>>, PortError> {
    let bad = || rejected("embed_shape");
    if !out.is_object() {
        return Err(bad());
    }
    let shape = Reflect::get(out, &JsValue::from_str("shape")).map_err(|_| bad())?;
    let shape: Vec<f64> = if Array::is_array(&shape) {
        Array::from(&shape)
            .iter()
            .map(|v| v.as_f64().unwrap_or(f64::NAN))
            .collect()
    } else {
        return Err(bad());
    };
    if shape != [n as f64, dims as f64] {
        return Err(bad());
    }
    let data = Reflect::get(out, &JsValue::from_str("data")).map_err(|_| bad())?;
    if !Array::is_array(&data) {
        return Err(bad());
    }
    let data = Array::from(&data);
    if data.length() as usize != n {
        return Err(bad());
    }
    let mut vectors = Vec::with_capacity(n);
    for row in data.iter() {
        if !(Array::is_array(&row) || row.is_instance_of::<Float32Array>()) {
            return Err(bad());
        }
        let row = Float32Array::new(&row);
        if row.length() as usize != dims {
            return Err(bad());
        }
        let values = row.to_vec();
        if values.iter().any(|x| !x.is_finite()) {
            return Err(bad());
        }
        vectors.push(values);
    }
    Ok(vectors)
}

impl Embedder for WorkersAiEmbedder {
    async fn embed(
        &self,
        model: &EmbedModel,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, PortError> {
        if model.name == EMBEDDER_ID {
            // The local embedder's vectors: not a Workers AI model.
            return Err(PortError::new(
                FailureBucket::ConfigInvalid,
                "embed_model_unsupported",
            ));
        }
        if texts.len() > self.batch_size_max {
            return Err(rejected("embed_batch_too_large"));
        }
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let text = Array::new_with_length(texts.len() as u32);
        for (i, t) in texts.iter().enumerate() {
            text.set(i as u32, JsValue::from_str(t));
        }
        let inputs = Object::new();
        let _ = Reflect::set(&inputs, &JsValue::from_str("text"), &text);
        // Only the models whose input takes it (bge-*-en-v1.5) get `pooling`;
        // an unknown model gets it as its generation recorded it.
        if let Some(pooling) = model.pooling.filter(|_| takes_pooling(&model.name)) {
            let _ = Reflect::set(
                &inputs,
                &JsValue::from_str("pooling"),
                &JsValue::from_str(pooling.as_str()),
            );
        }
        let result = match self.binding.run(&model.name, &inputs) {
            Ok(p) => JsFuture::from(p).await,
            Err(e) => Err(e),
        };
        let out = result.map_err(|e| classify(&js_error_text(&e)))?;
        read_output(&out, texts.len(), model.dimensions)
    }
}

/// Whether `model`'s Workers AI input takes `pooling`: a known model's
/// figure, and yes for one this project does not know.
fn takes_pooling(model: &str) -> bool {
    crate::config::known_model(model).is_none_or(|m| m.takes_pooling)
}
