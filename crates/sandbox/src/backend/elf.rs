//! The ELF interpreter (the dynamic loader) a file names, read from its first bytes:
//! which files of an image an agent needs (`worker::agent_files`), whether a
//! busybox is static (`tools::host_shell`).

/// Why an ELF file's interpreter could not be read from its first bytes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum ElfError {
    #[error("its ELF headers are cut short")]
    CutShort,
    #[error("its ELF interpreter lies past the bytes read")]
    PastTheHead,
    /// An offset or size beyond this machine's addresses.
    #[error(transparent)]
    OutOfRange(#[from] std::num::TryFromIntError),
}

/// The ELF interpreter (the dynamic loader) a file names, if it is a dynamically
/// linked ELF file; an error when it is one whose headers are not in `head`.
pub(crate) fn interpreter(head: &[u8]) -> Result<Option<String>, ElfError> {
    if !head.starts_with(b"\x7fELF") {
        return Ok(None);
    }
    let wide = head.get(4) == Some(&2);
    let big = head.get(5) == Some(&2);
    let number = |at: usize, len: usize| -> Result<u64, ElfError> {
        let bytes = head.get(at..at + len).ok_or(ElfError::CutShort)?;
        let fold = |acc: u64, b: &u8| (acc << 8) | u64::from(*b);
        Ok(if big {
            bytes.iter().fold(0, fold)
        } else {
            bytes.iter().rev().fold(0, fold)
        })
    };
    let word = if wide { 8 } else { 4 };
    let (phoff, phentsize, phnum) = if wide {
        (number(0x20, 8)?, number(0x36, 2)?, number(0x38, 2)?)
    } else {
        (number(0x1C, 4)?, number(0x2A, 2)?, number(0x2C, 2)?)
    };
    for index in 0..phnum {
        let at = usize::try_from(phoff + index * phentsize)?;
        // PT_INTERP: the loader's path, NUL-terminated, in the file.
        if number(at, 4)? != 3 {
            continue;
        }
        let (offset, size) = (
            number(at + word, word)?,
            number(at + if wide { 0x20 } else { 0x10 }, word)?,
        );
        let (offset, size) = (usize::try_from(offset)?, usize::try_from(size)?);
        let bytes = head
            .get(offset..offset.saturating_add(size))
            .ok_or(ElfError::PastTheHead)?;
        let path = String::from_utf8_lossy(bytes)
            .trim_end_matches('\0')
            .to_string();
        return Ok(Some(path));
    }
    Ok(None)
}
