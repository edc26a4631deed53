/// Text from a file made safe to print on one line of a terminal.
public enum Printable {
    /// Messages and listings quote what a file says (a policy's keys, a CT log list's descriptions and
    /// operator names); printed raw, such text could break the line or move the terminal's cursor
    /// (fuzzing found keys with newlines and tabs printed raw). Control characters (C0, DEL, C1),
    /// line and paragraph separators and bidirectional embeddings, overrides and isolates are written
    /// as `\u{…}` escapes (`\n`, `\t`, `\r` by name).
    public static func oneLine(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            case _ where scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .lineSeparator
                || scalar.properties.generalCategory == .paragraphSeparator || (0x202a...0x202e).contains(scalar.value)
                || (0x2066...0x2069).contains(scalar.value):
                out += "\\u{\(String(scalar.value, radix: 16))}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
