//! Just enough of Python to read a decorator's arguments: the source text of each argument
//! (split at top-level commas, strings and brackets respected), and the value of literal ones
//! (strings, with implicit concatenation; numbers; `True`/`False`/`None`; lists, tuples and
//! dicts of literals; and `Name(key=literal, ...)` calls, read as their keyword arguments).
//! Anything else — a variable, an f-string, an expression — is not a literal, and its source
//! text is kept for the placeholder that replaces it.

use serde_json::{Map, Number, Value};

/// One argument of a call: its keyword (`None` for a positional one) and its source text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Argument {
    pub keyword: Option<String>,
    pub source: String,
}

/// The arguments inside the parentheses that open at `text[0]`, and where they close; `None`
/// when they never close.
pub fn call_arguments(text: &str) -> Option<(Vec<Argument>, usize)> {
    let bytes = text.as_bytes();
    if bytes.first() != Some(&b'(') {
        return None;
    }
    let mut depth = 0usize;
    // The current argument's text, comments left out.
    let mut piece = String::new();
    let mut pieces = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' | b'\'' => {
                let end = skip_string(text, i)?;
                piece.push_str(&text[i..end]);
                i = end;
                continue;
            }
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth == 1 {
                    i += 1;
                    continue;
                }
            }
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    pieces.push(std::mem::take(&mut piece));
                    let arguments = pieces
                        .iter()
                        .map(|p| p.trim())
                        .filter(|p| !p.is_empty())
                        .map(argument)
                        .collect();
                    return Some((arguments, i + 1));
                }
            }
            b',' if depth == 1 => {
                pieces.push(std::mem::take(&mut piece));
                i += 1;
                continue;
            }
            _ => {}
        }
        let c = text[i..].chars().next()?;
        piece.push(c);
        i += c.len_utf8();
    }
    None
}

/// `key=value`, or a positional value.
fn argument(piece: &str) -> Argument {
    let ident_end = piece
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(piece.len());
    let rest = piece[ident_end..].trim_start();
    if ident_end > 0 && rest.starts_with('=') && !rest.starts_with("==") {
        return Argument {
            keyword: Some(piece[..ident_end].to_owned()),
            source: rest[1..].trim().to_owned(),
        };
    }
    Argument {
        keyword: None,
        source: piece.to_owned(),
    }
}

/// The index just after the string literal starting at `text[at]` (a quote).
fn skip_string(text: &str, at: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let quote = bytes[at];
    let triple = bytes.get(at..at + 3) == Some(&[quote, quote, quote][..]);
    let mut i = at + if triple { 3 } else { 1 };
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if triple {
            if bytes.get(i..i + 3) == Some(&[quote, quote, quote][..]) {
                return Some(i + 3);
            }
        } else if bytes[i] == quote {
            return Some(i + 1);
        } else if bytes[i] == b'\n' {
            return None;
        }
        i += 1;
    }
    None
}

/// The value of a literal expression, or `None` when it is not one.
pub fn literal(source: &str) -> Option<Value> {
    let mut reader = Reader {
        text: source.trim(),
        at: 0,
    };
    let value = reader.value()?;
    reader.space();
    (reader.at == reader.text.len()).then_some(value)
}

struct Reader<'a> {
    text: &'a str,
    at: usize,
}

impl Reader<'_> {
    fn rest(&self) -> &str {
        &self.text[self.at..]
    }

    fn space(&mut self) {
        while let Some(c) = self.rest().chars().next() {
            if c.is_whitespace() {
                self.at += c.len_utf8();
            } else if c == '#' {
                self.at += self.rest().find('\n').unwrap_or(self.rest().len());
            } else if c == '\\' && self.rest()[1..].starts_with('\n') {
                self.at += 2;
            } else {
                break;
            }
        }
    }

    fn eat(&mut self, token: &str) -> bool {
        self.space();
        if self.rest().starts_with(token) {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Option<Value> {
        self.space();
        let c = self.rest().chars().next()?;
        match c {
            '"' | '\'' => self.strings(),
            'r' | 'R' | 'u' | 'U' if self.rest()[1..].starts_with(['"', '\'']) => self.strings(),
            '[' => self.sequence(']'),
            '(' => self.sequence(')'),
            '{' => self.dict(),
            c if c.is_ascii_digit() || c == '-' || c == '.' => self.number(),
            _ => self.word(),
        }
    }

    /// One or more adjacent string literals, joined.
    fn strings(&mut self) -> Option<Value> {
        let mut out = String::new();
        loop {
            self.space();
            let rest = self.rest();
            let raw = rest.starts_with(['r', 'R']);
            let prefixed = raw || rest.starts_with(['u', 'U']);
            let quote_at = usize::from(prefixed);
            if !rest[quote_at..].starts_with(['"', '\'']) {
                break;
            }
            let start = self.at + quote_at;
            let end = skip_string(self.text, start)?;
            let quote = &self.text[start..=start];
            let triple = self.text[start..].starts_with(&quote.repeat(3));
            let (open, close) = if triple {
                (start + 3, end - 3)
            } else {
                (start + 1, end - 1)
            };
            let body = &self.text[open..close];
            out.push_str(&if raw { body.to_owned() } else { unescape(body) });
            self.at = end;
        }
        (!out.is_empty() || self.text[..self.at].ends_with(['"', '\'']))
            .then_some(Value::String(out))
    }

    fn sequence(&mut self, close: char) -> Option<Value> {
        self.at += 1;
        let mut items = Vec::new();
        loop {
            if self.eat(&close.to_string()) {
                return Some(Value::Array(items));
            }
            items.push(self.value()?);
            if !self.eat(",") {
                return self.eat(&close.to_string()).then_some(Value::Array(items));
            }
        }
    }

    fn dict(&mut self) -> Option<Value> {
        self.at += 1;
        let mut map = Map::new();
        loop {
            if self.eat("}") {
                return Some(Value::Object(map));
            }
            let Value::String(key) = self.value()? else {
                return None;
            };
            if !self.eat(":") {
                return None;
            }
            map.insert(key, self.value()?);
            if !self.eat(",") {
                return self.eat("}").then_some(Value::Object(map));
            }
        }
    }

    fn number(&mut self) -> Option<Value> {
        let len = self
            .rest()
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_')))
            .unwrap_or(self.rest().len());
        let text = self.rest()[..len].replace('_', "");
        self.at += len;
        if let Ok(n) = text.parse::<i64>() {
            return Some(Value::Number(n.into()));
        }
        text.parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number)
    }

    /// `True`, `False`, `None`, or `Name(key=literal, ...)` read as its keywords.
    fn word(&mut self) -> Option<Value> {
        let len = self
            .rest()
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(self.rest().len());
        if len == 0 {
            return None;
        }
        let word = &self.rest()[..len];
        let value = match word {
            "True" => Some(Value::Bool(true)),
            "False" => Some(Value::Bool(false)),
            "None" => Some(Value::Null),
            _ => None,
        };
        self.at += len;
        if value.is_some() {
            return value;
        }
        // A call whose arguments are all keyword literals (RequestParams(maxTokens=2048)).
        self.space();
        if !self.rest().starts_with('(') {
            return None;
        }
        let (arguments, end) = call_arguments(self.rest())?;
        self.at += end;
        let mut map = Map::new();
        for argument in arguments {
            map.insert(argument.keyword?, literal(&argument.source)?);
        }
        Some(Value::Object(map))
    }
}

/// Python's escapes in a (non-raw) string body.
fn unescape(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('\n') | None => {}
            Some(other @ ('\\' | '\'' | '"')) => out.push(other),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn literals_are_read_and_expressions_are_not() {
        assert_eq!(literal(r#""a" 'b'"#), Some(json!("ab")));
        assert_eq!(literal("\"\"\"two\nlines\"\"\""), Some(json!("two\nlines")));
        assert_eq!(literal(r#"["x", 'y',]"#), Some(json!(["x", "y"])));
        assert_eq!(
            literal(r#"{"t": 0.5, "n": 3, "ok": True}"#),
            Some(json!({"t": 0.5, "n": 3, "ok": true}))
        );
        assert_eq!(
            literal("RequestParams(maxTokens=2048, temperature=0.2)"),
            Some(json!({"maxTokens": 2048, "temperature": 0.2}))
        );
        for not_literal in [
            "PROMPT",
            "f\"hi {x}\"",
            "load('x')",
            "\"a\" + b",
            "RequestParams(**opts)",
        ] {
            assert_eq!(literal(not_literal), None, "{not_literal}");
        }
    }

    #[test]
    fn arguments_split_at_top_level_commas_only() {
        let (args, end) = call_arguments(r#"("n", instruction="a, (b)", servers=["x", "y"]) tail"#)
            .expect("closes");
        assert_eq!(args.len(), 3);
        assert_eq!(args[0].keyword, None);
        assert_eq!(args[1].keyword.as_deref(), Some("instruction"));
        assert_eq!(args[1].source, r#""a, (b)""#);
        assert_eq!(args[2].source, r#"["x", "y"]"#);
        assert_eq!(
            &r#"("n", instruction="a, (b)", servers=["x", "y"]) tail"#[end..],
            " tail"
        );
    }
}
