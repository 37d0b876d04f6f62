//! Byte sizes as configuration spells them: `16MiB`, `512KiB`, `10MB`, `1048576`.

/// Parses a byte size: a bare number of bytes, or a number with a unit (B, KB, MB, GB in
/// powers of 1000; KiB, MiB, GiB in powers of 1024; case-insensitive).
pub fn parse_size(input: &str) -> Result<u64, String> {
    let s = input.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("{input:?} is not a size: use bytes or units like 16MiB, 10MB"))?;
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" | "k" => 1_000,
        "mb" | "m" => 1_000_000,
        "gb" | "g" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        other => return Err(format!("{input:?}: unknown size unit {other:?}")),
    };
    number
        .checked_mul(multiplier)
        .ok_or_else(|| format!("{input:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("16MiB"), Ok(16 * 1024 * 1024));
        assert_eq!(parse_size("1024"), Ok(1024));
        assert_eq!(parse_size("10MB"), Ok(10_000_000));
        assert_eq!(parse_size("512 kib"), Ok(512 * 1024));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("5XB").is_err());
        assert!(parse_size("99999999999999GiB").is_err());
    }
}
