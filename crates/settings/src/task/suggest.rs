//! "Did you mean": the valid name nearest to a misspelt one.

/// Words longer than this get no suggestion: a typo of a key or a choice is short,
/// and comparing a pasted megabyte with every candidate would cost time for nothing.
pub(crate) const MAX_WORD_CHARS: usize = 64;

/// The candidate nearest to `word`, if near enough to be a plausible typo: a few
/// edits away (a swap of neighbours counts as one), or a prefix (`openai` →
/// `openai-chat`).
pub(crate) fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    // The byte test first: `chars().count()` on a huge word is itself a cost.
    if word.len() > 4 * MAX_WORD_CHARS || word.chars().count() > MAX_WORD_CHARS {
        return None;
    }
    if word.len() >= 3
        && let Some(c) = candidates.iter().find(|c| c.starts_with(word))
    {
        return Some(c);
    }
    candidates
        .iter()
        .map(|c| (strsim::osa_distance(word, c), *c))
        .filter(|(d, c)| *d <= c.len().max(word.len()).div_ceil(3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_keys_only() {
        let keys = ["max_loops", "model", "kind"];
        assert_eq!(closest("max_loop", &keys), Some("max_loops"));
        assert_eq!(closest("modle", &keys), Some("model"));
        assert_eq!(closest("mdoel", &keys), Some("model"));
        assert_eq!(closest("max", &keys), Some("max_loops"));
        assert_eq!(closest("colour", &keys), None);
        assert_eq!(closest("", &keys), None);
    }

    #[test]
    fn long_words_get_no_suggestion() {
        let over = "m".repeat(MAX_WORD_CHARS + 1);
        let near = format!("{over}x");
        assert_eq!(closest(&over, &[near.as_str()]), None);
        let at_limit = "m".repeat(MAX_WORD_CHARS);
        let near = format!("{at_limit}x");
        assert_eq!(closest(&at_limit, &[near.as_str()]), Some(near.as_str()));
    }
}
