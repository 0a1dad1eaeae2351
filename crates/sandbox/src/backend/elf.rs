//! The ELF interpreter (the dynamic loader) a file names, read from its first bytes:
//! which files of an image an agent needs (`worker::agent_files`), whether a
//! busybox is static (`tools::host_shell`).

/// The ELF interpreter (the dynamic loader) a file names, if it is a dynamically
/// linked ELF file; an error when it is one whose headers are not in `head`.
pub(crate) fn interpreter(head: &[u8]) -> Result<Option<String>, String> {
    if !head.starts_with(b"\x7fELF") {
        return Ok(None);
    }
    let wide = head.get(4) == Some(&2);
    let big = head.get(5) == Some(&2);
    let number = |at: usize, len: usize| -> Result<u64, String> {
        let bytes = head
            .get(at..at + len)
            .ok_or_else(|| "its ELF headers are cut short".to_string())?;
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
        let at = usize::try_from(phoff + index * phentsize).map_err(|e| e.to_string())?;
        // PT_INTERP: the loader's path, NUL-terminated, in the file.
        if number(at, 4)? != 3 {
            continue;
        }
        let (offset, size) = (
            number(at + word, word)?,
            number(at + if wide { 0x20 } else { 0x10 }, word)?,
        );
        let (offset, size) = (
            usize::try_from(offset).map_err(|e| e.to_string())?,
            usize::try_from(size).map_err(|e| e.to_string())?,
        );
        let bytes = head
            .get(offset..offset.saturating_add(size))
            .ok_or_else(|| "its ELF interpreter lies past the bytes read".to_string())?;
        let path = String::from_utf8_lossy(bytes)
            .trim_end_matches('\0')
            .to_string();
        return Ok(Some(path));
    }
    Ok(None)
}
