import Foundation

/// RFC 3339 timestamps (`2027-06-30T00:00:00Z`, `2027-06-30T02:00:00+02:00`): the only date form the
/// policy accepts, so `until:` never depends on the machine's time zone.
public enum RFC3339 {
    public static func parse(_ text: String) -> Date? {
        let chars = Array(text.utf8)
        guard chars.count >= 20 else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= chars.count else { return nil }
            var value = 0
            for c in chars[range] {
                guard c >= 0x30 && c <= 0x39 else { return nil }
                value = value * 10 + Int(c - 0x30)
            }
            return value
        }
        func expect(_ i: Int, _ set: String) -> Bool { i < chars.count && set.utf8.contains(chars[i]) }
        guard let year = number(0..<4), expect(4, "-"), let month = number(5..<7), expect(7, "-"),
              let day = number(8..<10), expect(10, "Tt"), let hour = number(11..<13), expect(13, ":"),
              let minute = number(14..<16), expect(16, ":"), let second = number(17..<19) else { return nil }
        var index = 19
        if expect(index, ".") {
            index += 1
            let start = index
            while index < chars.count, chars[index] >= 0x30 && chars[index] <= 0x39 { index += 1 }
            guard index > start else { return nil }
        }
        var offset = 0
        if expect(index, "Zz") {
            index += 1
        } else if expect(index, "+-"), let oh = number(index + 1..<index + 3), expect(index + 3, ":"),
                  let om = number(index + 4..<index + 6) {
            offset = (oh * 60 + om) * 60 * (chars[index] == UInt8(ascii: "-") ? -1 : 1)
            index += 6
        } else {
            return nil
        }
        guard index == chars.count, (1...12).contains(month), (1...daysIn(month, year)).contains(day), hour < 24,
              minute < 60, second < 61 else { return nil }
        let days = daysFromCivil(year, month, day)
        let seconds = Double(days * 86400 + hour * 3600 + minute * 60 + second - offset)
        return Date(timeIntervalSince1970: seconds)
    }

    public static func format(_ date: Date) -> String {
        let total = Int(date.timeIntervalSince1970.rounded(.down))
        let days = total >= 0 ? total / 86400 : (total - 86399) / 86400
        let secs = total - days * 86400
        let (y, m, d) = civilFromDays(days)
        guard (0...9999).contains(y) else {
            func pad(_ v: Int, _ n: Int) -> String { String(repeating: "0", count: max(0, n - String(v).count)) + String(v) }
            return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(secs / 3600, 2)):\(pad(secs / 60 % 60, 2)):\(pad(secs % 60, 2))Z"
        }
        // Written as bytes: a decision line formats every chain certificate's date.
        return String(unsafeUninitializedCapacity: 20) { out in
            func put(_ value: Int, _ width: Int, at index: Int) {
                var value = value
                for i in stride(from: index + width - 1, through: index, by: -1) {
                    out[i] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
            }
            put(y, 4, at: 0); out[4] = UInt8(ascii: "-"); put(m, 2, at: 5); out[7] = UInt8(ascii: "-"); put(d, 2, at: 8)
            out[10] = UInt8(ascii: "T"); put(secs / 3600, 2, at: 11); out[13] = UInt8(ascii: ":"); put(secs / 60 % 60, 2, at: 14)
            out[16] = UInt8(ascii: ":"); put(secs % 60, 2, at: 17); out[19] = UInt8(ascii: "Z")
            return 20
        }
    }

    private static func daysIn(_ month: Int, _ year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    // Howard Hinnant's days_from_civil / civil_from_days.
    private static func daysFromCivil(_ y0: Int, _ m: Int, _ d: Int) -> Int {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }

    private static func civilFromDays(_ z0: Int) -> (Int, Int, Int) {
        let z = z0 + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }
}
