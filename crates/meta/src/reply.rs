//! Reply texts to typed replies, for every Meta message type: lenient about
//! wrapping (one ``` fence, YAML or JSON), strict about content. The error says what
//! is wrong, so it can be sent back in a re-ask.

use serde::Deserialize;
use serde_norway::Value;

use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::secret::Redactor;
use agent_runner_core::yaml::Rules;

/// What is wrong with a reply, in words. Not an error type on purpose: the text is
/// the product, sent back to Meta in a re-ask so the model can fix its reply.
pub type Reask = String;

/// A reply type: its `type` value, how to check a reply document, and its JSON
/// Schema (`meta::schema`) for providers that can hold a model to one.
pub trait Reply: Sized {
    const KIND: &'static str;
    fn from_value(value: Value) -> Result<Self, Reask>;
    fn schema() -> serde_json::Value;
}

/// Parses and checks a reply of type `T::KIND`.
pub fn parse_reply<T: Reply>(text: &str) -> Result<T, Reask> {
    parse_reply_masked(text, &Redactor::default(), Interrupt::never())
        .unwrap_or_else(|| Err("the YAML parser stopped".into()))
}

/// `parse_reply`, with `redactor`'s secrets masked in every string of the reply once
/// it is parsed: the structure is read from the text as sent (masking the text first
/// could turn a `true` into `***`, a YAML alias), the contents never hold a secret.
/// None when `interrupt` was set before the text was parsed.
pub(crate) fn parse_reply_masked<T: Reply>(
    text: &str,
    redactor: &Redactor,
    interrupt: Interrupt,
) -> Option<Result<T, Reask>> {
    let body = strip_fence(text);
    let value = agent_runner_core::yaml::parse_unless_stopped(body, Rules::Reply, interrupt)?;
    Some(checked(
        value.map_err(|e| format!("not valid YAML: {e}")),
        redactor,
    ))
}

fn checked<T: Reply>(value: Result<Value, Reask>, redactor: &Redactor) -> Result<T, Reask> {
    let mut value = value?;
    let Value::Mapping(map) = &value else {
        return Err("expected one YAML mapping with a `type` key".into());
    };
    match map.get("type").and_then(Value::as_str) {
        Some(t) if t == T::KIND => {}
        Some(t) => return Err(format!("`type` is {t:?}, expected {:?}", T::KIND)),
        None => return Err(format!("`type: {}` is missing", T::KIND)),
    }
    if !redactor.is_empty() {
        mask_strings(&mut value, redactor);
    }
    T::from_value(value)
}

fn mask_strings(value: &mut Value, redactor: &Redactor) {
    match value {
        Value::String(s) => {
            let masked = redactor.redact(s);
            if masked != *s {
                *s = masked;
            }
        }
        Value::Sequence(items) => items.iter_mut().for_each(|v| mask_strings(v, redactor)),
        Value::Mapping(map) => map.values_mut().for_each(|v| mask_strings(v, redactor)),
        Value::Tagged(tagged) => mask_strings(&mut tagged.value, redactor),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Removes one surrounding ``` fence (```yaml, ```json or bare), if there is one.
pub fn strip_fence(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(rest) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let Some(rest) = rest.strip_suffix("```") else {
        return trimmed;
    };
    // Drop the info string (`yaml`, `json`) on the opening line.
    match rest.split_once('\n') {
        Some((info, body)) if !info.trim().contains(' ') => body.trim(),
        _ => rest.trim(),
    }
}

/// A JSON reply without its null members (strict mode's way of leaving a field
/// out); anything else as it is.
pub(crate) fn without_nulls(text: &str) -> String {
    let body = strip_fence(text);
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(mut value) => {
            drop_nulls(&mut value);
            value.to_string()
        }
        Err(_) => text.to_string(),
    }
}

fn drop_nulls(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// A reply document decoded into `T`, the serde error as the problem.
pub fn decode<T: for<'de> Deserialize<'de>>(value: Value) -> Result<T, Reask> {
    serde_norway::from_value(value).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Any;

    impl Reply for Any {
        const KIND: &'static str = "any";
        fn from_value(_: Value) -> Result<Self, Reask> {
            Ok(Any)
        }
        fn schema() -> serde_json::Value {
            crate::schema::object(&[("type", crate::schema::kind("any"))])
        }
    }

    #[test]
    fn deep_nesting_and_tags_are_refused_before_the_parse() {
        let deep = format!("type: any\nx: {}", "{a: ".repeat(200_000));
        assert_eq!(
            parse_reply::<Any>(&deep).err().unwrap(),
            "not valid YAML: YAML nested deeper than 32 levels at line 2 column 128"
        );
        assert!(
            parse_reply::<Any>("type: any\nx: !secret y")
                .err()
                .unwrap()
                .contains("YAML tag !secret refused")
        );
        assert!(parse_reply::<Any>("type: any\nx: {a: [1, {b: 2}]}").is_ok());
    }

    #[test]
    fn nulls_are_left_out_and_other_text_kept() {
        assert_eq!(
            without_nulls(
                r#"{"type":"next_action","worker_call":null,"d":{"a":null,"b":[1,null]}}"#
            ),
            r#"{"d":{"b":[1,null]},"type":"next_action"}"#
        );
        assert_eq!(without_nulls("type: x\n"), "type: x\n");
    }

    #[test]
    fn fences_are_stripped_once() {
        assert_eq!(strip_fence("```yaml\ntype: x\n```"), "type: x");
        assert_eq!(
            strip_fence("  ```json\n{\"type\": 1}\n```\n"),
            "{\"type\": 1}"
        );
        assert_eq!(strip_fence("```\ntype: x\n```"), "type: x");
        assert_eq!(strip_fence("type: x"), "type: x");
        assert_eq!(strip_fence("```yaml\ntype: x"), "```yaml\ntype: x");
    }
}
