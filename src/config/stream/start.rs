//! Where a stream that was never read starts (`start` in its table, issue 49): the beginning
//! of its topic (the default), its end when the stream is first read (`latest`), or the first
//! message at or after a time (an RFC 3339 time, by the messages' Kafka timestamps). Checked
//! here with the rest of the configuration; resolved into offsets by `crate::kafka::start`.
//! The RFC 3339 reader is shared with the API's windows (`"window": {"from": ...}`).

/// A stream's `start`, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    /// Every message the topic holds (the default).
    Earliest,
    /// The messages produced after the stream is first read.
    Latest,
    /// The messages whose timestamps are at or after this Unix time (ms).
    Time(i64),
}

impl StartAt {
    /// `earliest`, `latest` or an RFC 3339 time; the error says what is accepted.
    pub fn parse(s: &str) -> Result<StartAt, String> {
        match s {
            "earliest" => Ok(StartAt::Earliest),
            "latest" => Ok(StartAt::Latest),
            _ => rfc3339_ms(s).map(StartAt::Time).ok_or_else(|| {
                format!(
                    "start = \"{s}\" is not earliest, latest or an RFC 3339 time such as \
                     2026-11-28T09:00:00Z"
                )
            }),
        }
    }
}

/// `2026-11-27T10:00:00Z`, `2026-11-27T10:00:00.250+01:00`: Unix ms (None if malformed).
pub fn rfc3339_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut ms = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let f = &frac[..digits];
        ms = format!("{:0<3}", &f[..f.len().min(3)]).parse().ok()?;
        rest = &frac[digits..];
    }
    let offset_min = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && rest.as_bytes()[3] == b':' => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let oh: i64 = rest[1..3].parse().ok()?;
            let om: i64 = rest[4..6].parse().ok()?;
            sign * (oh * 60 + om)
        }
        _ => return None,
    };
    // Days from 1970-01-01 (Howard Hinnant's days_from_civil).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + mi - offset_min) * 60_000 + sec * 1000 + ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times_read_as_unix_ms() {
        assert_eq!(rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339_ms("2023-11-14T22:13:20Z"), Some(1_700_000_000_000));
        assert_eq!(
            rfc3339_ms("2023-11-14T22:13:20.5Z"),
            Some(1_700_000_000_500)
        );
        assert_eq!(
            rfc3339_ms("2023-11-14T23:13:20+01:00"),
            Some(1_700_000_000_000)
        );
        assert_eq!(rfc3339_ms("2024-02-29T00:00:00Z"), Some(1_709_164_800_000));
        for bad in [
            "2023-11-14",
            "2023-13-14T00:00:00Z",
            "2023-11-14T22:13:20",
            "yesterday",
            "2023-11-14T22:13:20.Z",
        ] {
            assert_eq!(rfc3339_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_start_is_earliest_latest_or_a_time() {
        assert_eq!(StartAt::parse("earliest"), Ok(StartAt::Earliest));
        assert_eq!(StartAt::parse("latest"), Ok(StartAt::Latest));
        assert_eq!(
            StartAt::parse("2023-11-14T22:13:20Z"),
            Ok(StartAt::Time(1_700_000_000_000))
        );
        let e = StartAt::parse("newest").unwrap_err();
        assert!(
            e.contains("\"newest\"") && e.contains("earliest, latest"),
            "{e}"
        );
    }
}
