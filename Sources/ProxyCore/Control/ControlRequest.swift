import PinPolicy

/// One request line of the control socket's protocol (`docs/operations.md`, "Quarantines"):
/// `quarantine list`, `quarantine lift HOST:PORT` (an IPv6 address in brackets) or
/// `quarantine lift --all`. Words are separated by spaces; a trailing CR is ignored.
enum ControlRequest: Equatable {
    case list
    case lift(Authority)
    case liftAll

    /// What `error` answers to a line that is none of the above.
    static let usage = "requests: 'quarantine list', 'quarantine lift HOST:PORT' ([IPv6]:PORT), 'quarantine lift --all'"

    /// Why a line is not a request: the text after `error `.
    struct Problem: Error, Equatable, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// The request, or why the line is not one.
    static func parse(_ line: String) -> Result<ControlRequest, Problem> {
        var text = Substring(line)
        if text.hasSuffix("\r") { text = text.dropLast() }
        guard text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else { return .failure(Problem("the request is not printable ASCII; \(usage)")) }
        let words = text.split(separator: " ")
        switch words.count {
        case 2 where words[0] == "quarantine" && words[1] == "list":
            return .success(.list)
        case 3 where words[0] == "quarantine" && words[1] == "lift" && words[2] == "--all":
            return .success(.liftAll)
        case 3 where words[0] == "quarantine" && words[1] == "lift":
            switch Authority.parse(String(words[2])) {
            case .success(let authority): return .success(.lift(authority))
            case .failure(let problem): return .failure(Problem("'\(words[2])' is not HOST:PORT: \(problem)"))
            }
        default:
            return .failure(Problem("unknown request; \(usage)"))
        }
    }
}
