//! The bounds of every message a user sends (follow-ups, rejections, a job's
//! message): text, and no longer than the runner's `--message` takes.

/// The longest message a user sends, in bytes: the runner's `--message` bound.
pub const MAX_MESSAGE: usize = 8192;

/// Why a message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    #[error("must be 1 to {MAX_MESSAGE} bytes of text (got {0})")]
    Size(usize),
    #[error("must not contain NUL")]
    Nul,
}

/// `message` trimmed, if it is 1 to `MAX_MESSAGE` bytes of text.
pub fn check_message(message: &str) -> Result<String, MessageError> {
    let trimmed = message.trim();
    if trimmed.is_empty() || trimmed.len() > MAX_MESSAGE {
        return Err(MessageError::Size(trimmed.len()));
    }
    if trimmed.contains('\0') {
        return Err(MessageError::Nul);
    }
    Ok(trimmed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_bounded_text() {
        assert_eq!(check_message("  more tests \n").unwrap(), "more tests");
        assert!(check_message(" \n").is_err());
        assert!(check_message(&"x".repeat(MAX_MESSAGE + 1)).is_err());
        assert!(check_message(&"x".repeat(MAX_MESSAGE)).is_ok());
        assert!(check_message("a\0b").is_err());
    }

    #[test]
    fn the_errors_read_as_before() {
        assert_eq!(
            check_message(" ").unwrap_err().to_string(),
            "must be 1 to 8192 bytes of text (got 0)"
        );
        assert_eq!(
            check_message("a\0b").unwrap_err().to_string(),
            "must not contain NUL"
        );
    }
}
