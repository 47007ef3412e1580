"""Secrets written in prose: the value after a password word, as chat writes it
(docs/ARCHITECTURE.md §3 rule 8b; run by `ingest.rules.scrub`, after its `key=value` rules).

Three shapes, in English, German, Spanish, French, Portuguese and Russian:

- after: a password word, up to five words of filler, a link (`is`, `ist`, `es`, `est`, `é`,
  `это`, `:`, `=`, a dash), maybe `it's` or `now`, then the value: "the password for the build
  box is hunter2xyz", "wifi pw is Xyz123, don't share it", "my vpn password: it's …", "das
  Passwort für den Server ist …", "la contraseña del wifi es …", "le mot de passe est …", "a
  senha é …", "пароль от сервера — …", "card PIN: 4829".
- direct: a password word and the value, no link: "use password X to log in", "pw X".
- before: the value, a link, a few words, a password word: "X is the password", "X ist das
  Passwort", "X es la contraseña".

Whether the word in the value's place is a value (`looks_like_value`), in order:

1. Shorter than 4 characters, only symbols, or a reference rather than a value (`$VAR`, `<…>`,
   a path, a URL, an `-option`): not a value.
2. Holding a digit or a symbol (other than a hyphen or apostrophe inside a word): a value
   ("hunter2xyz", "soleil!42", "banana#77"). A PIN is digits only; a number followed by a
   unit ("4096 bits", "12 characters") counts something.
3. A plain word is a value only after a word that means nothing but password (not `PIN`,
   `clave`, `token`, `passwd`), in the after shape, as the last word of its clause (end of
   line, `,`, `.`, …), and when it is no word of prose: not in the short per-language lists
   below ("wrong", "expired", "falsch", "incorrecta") nor shaped like a participle, adverb or
   adjective ("-ed", "-ing", "-ly", "-able", "-ado", "-ida", "-ый", …). So "the password is
   wrong again", "is on the whiteboard", "is too short", "ist falsch", "es incorrecta" stay.

The key word's compounds are talk, not a value: "the password manager is KeePassXC", "1024 is
the max password length". Quoted values ("the password is 'correct horse'") are values unless
a single prose word. Every pattern is linear: words are possessive runs, filler and links are
bounded, and each rule runs only when its key words are in the text.
"""

from __future__ import annotations

import re
import unicodedata

from ingest.rules.scrub_tokens import NOT_MARKED, Rule
from ingest.rules.scrub_view import fold

__all__ = ["PROSE_RULES", "looks_like_value"]


def _words(text: str) -> frozenset[str]:
    return frozenset(fold(w).lower() for w in text.split())


def _alternation(words: tuple[str, ...]) -> str:
    """Longest first, spaces as runs of blanks, each folded as the view is."""
    folded = sorted({fold(w).lower() for w in words}, key=len, reverse=True)
    return "|".join(re.escape(w).replace(r"\ ", r"[ \t]+") for w in folded)


# Words that mean password and nothing else: a plain word after them may be the value.
_KEYS = (
    "password", "passphrase", "pass phrase", "passcode", "pw",
    "passwort", "kennwort", "contraseña", "mot de passe", "senha",
    "пароль", "пароля", "паролем",
)  # fmt: skip
# Words that mean password among other things: only a value with a digit or symbol counts.
_AMBIGUOUS_KEYS = ("passwd", "pwd", "mdp", "clave", "api key", "access key", "secret key", "token")
_PIN_KEYS = ("pin", "pin code", "pincode")  # a PIN is 4 to 12 digits
_STRICT = _words(" ".join(_AMBIGUOUS_KEYS + _PIN_KEYS))
_PINS = _words(" ".join(_PIN_KEYS))

# What links a key to its value, after it ("is") or before it ("X is the password").
_LINKS = (
    "is", "was", "'s", "’s", "ist", "war", "lautet", "es", "era", "est", "etait", "c'est", "é",
    "eh", "это",
)  # fmt: skip
_BEFORE_LINKS = ("is", "was", "ist", "war", "es", "era", "est", "etait", "é", "это", "— это")
# Between the link and the value: "it's", "now", "set to".
_LEAD_INS = ("it's", "it’s", "its", "it is", "that's", "c'est", "das ist", "es ist")
_ADVERBS = (
    "now", "still", "just", "currently", "simply", "always", "also", "set to", "now set to",
    "changed to", "jetzt", "nun", "noch", "immer", "einfach", "ahora", "todavia", "maintenant",
    "toujours", "juste", "agora", "ainda", "теперь", "сейчас", "просто",
)  # fmt: skip
# The word after a key that makes it a modifier: talk about passwords, not one.
_COMPOUNDS = _words(
    "manager managers policy policies prompt prompts field fields dialog dialogue box length "
    "reset resets change changes recovery protection protected authentication auth hash hashes "
    "file files requirement requirements rule rules strength history expiry expiration store "
    "storage vault keyring generator cracker cracking entry screen form less free based "
    "login manager's character characters chars digits letters"
)
_NEGATIONS = _words(
    "not no never isn't wasn't nicht kein keine nie no nunca pas jamais não nao не"
)
_UNITS = _words(
    "characters chars character letters digits symbols bits bytes byte bit words times days "
    "hours minutes seconds years long zeichen stellen caracteres digitos caracteres символов"
)
# Words of prose that end a "the password is …" clause (and function words that begin one).
_PROSE = _words(
    # English
    "a an the my your his her its our their this that these those it me you him them us what "
    "which who whose where when why how not no nor yes yeah yep nope none nothing something "
    "anything everything null nil empty blank unset undefined default required optional same "
    "different wrong right correct incorrect invalid valid good bad fine okay ok weak strong "
    "long short simple easy hard difficult secure insecure safe unsafe random unknown known "
    "new old current previous here there below above elsewhere somewhere needed necessary "
    "mandatory case too very so also just still now already only really quite pretty enough "
    "again even always never sometimes usually on in at to for of from with by into onto off "
    "out up down over under about as like than then and or but if because since until while "
    "before after be been being set gone lost broken fake real secret private public mine "
    "yours hers theirs ours same there's it's that's what's expired wrong reset redacted "
    "hidden missing unchanged unknown please thanks thank sorry great awesome cool nice "
    "weird strange odd funny obvious visible plaintext cleartext plain clear text setup "
    "ready active inactive shown given sent kept stolen taken written forgotten chosen "
    "whatever fixed "
    # German
    "der die das den dem des ein eine einen einem einer mein meine dein deine sein seine ihr "
    "ihre unser euer es er sie wir nicht kein keine ja nein nichts falsch richtig korrekt "
    "ungültig gültig abgelaufen leer gesperrt geändert neu alt sicher unsicher schwach stark "
    "kurz lang zu sehr auch noch schon nur jetzt hier dort da oben unten gleich anders "
    "bekannt unbekannt geheim egal weg auf in im an am zum zur für mit von vom bei aus nach "
    "über unter und oder aber weil wenn dass ob wie was wer wo wann warum doch halt mal "
    "eigentlich immer nie zurückgesetzt vergessen "
    # Spanish
    "el la los las lo un una mi mis tu tus su sus nuestro nuestra este esta eso esto ese esa "
    "no sí si nada ninguna ninguno incorrecta incorrecto correcta correcto inválida inválido "
    "válida válido vacía vacío nueva nuevo vieja viejo igual distinta distinto diferente "
    "segura seguro débil fuerte corta corto larga largo muy demasiado también todavía ya "
    "solo aquí allí ahí en de del al con por para sin sobre y o pero porque que cual cuál "
    "quien donde cuando como secreta secreto otra otro mala malo buena bueno "
    # French
    "le la les un une mon ma mes ton ta tes son sa ses notre votre leur ce cette ça cela ne "
    "pas non oui rien aucun aucune faux fausse incorrect incorrecte correct correcte bon "
    "bonne mauvais mauvaise invalide valide vide expiré expirée bloqué bloquée changé oublié "
    "nouveau nouvelle ancien ancienne même différent différente sûr sûre faible fort forte "
    "court courte longue très trop aussi encore déjà seulement ici là dans du des à au "
    "aux en sur sous avec pour par sans et ou mais parce qui quoi où quand comment secret "
    "secrète toujours jamais erroné erronée "
    # Portuguese
    "o a os as um uma meu minha teu tua seu sua nosso nossa este esta isso isto esse essa "
    "não sim nada nenhum nenhuma errada errado incorreta incorreto correta correto inválida "
    "válida vazia vazio expirada bloqueada nova novo velha velho igual diferente segura "
    "seguro fraca fraco forte curta curto longa longo muito demais também ainda já só aqui "
    "ali lá em no na de do da com por para sem sobre e ou mas porque que qual quem onde "
    "quando como secreta secreto outra outro "
    # Russian
    "не нет да это то тот та такой мой моя моё твой твоя наш ваш его её их неверный "
    "неправильный неверен неправильно правильный верный пустой простой сложный слабый "
    "надёжный надежный короткий длинный старый новый другой истёк истек сброшен изменён "
    "изменен заблокирован секретный здесь там в на от для с без и или но очень слишком "
    "тоже ещё уже только где когда как что кто"
)
# Shapes of participles, adverbs and adjectives ("encrypted", "failing", "universally",
# "changeable", "cambiada", "perdido", "неверный"): a value is seldom one of these.
_PROSE_SHAPE = re.compile(
    r".{3,}(?:ed|ing|ly|able|ible|ful|less|ous|ive|ness|ment|lich|ig|bar|los|ado|ada|ido|ida)"
    r"|ge.{3,}t|.{2,}(?:ый|ий|ой|ая|яя|ое|ее|ые|ие|ен|ён|на|но)"
)

# --- the patterns (on the normalised view; `ingest.rules.scrub_view`)

# Not inside a marker (`[redacted:password]`), a path or a file name.
_KEY = (
    r"(?<![\w/.])(?<!\[redacted:)(?P<key>"
    + _alternation(_KEYS + _AMBIGUOUS_KEYS + _PIN_KEYS)
    + r")(?![\w])"
)
_DIRECT_KEY = r"(?<![\w/.])(?<!\[redacted:)(?P<key>" + _alternation(_KEYS) + r")(?![\w])"
_WORD = r"[\w@'’\-]++(?:\.[\w@'’\-]++)*+"  # a filler word: no sentence punctuation in it
# A value: quoted, or a run of non-spaces without the punctuation that ends a sentence after it
# (a `!` or `?` at its end is taken: many passwords end so, and the judgment ignores it).
_END = r".,;:…)\]}>\"'`”»"
_VALUE = (
    r"(?:\"" + NOT_MARKED + r"(?P<dq>[^\"\n]{1,100})\""
    r"|'" + NOT_MARKED + r"(?P<sq>[^'\n]{1,100})'"
    r"|`" + NOT_MARKED + r"(?P<bq>[^`\n]{1,100})`"
    r"|[“«„]" + NOT_MARKED + r"(?P<uq>[^”»“\n]{1,100})[”»“]"
    r"|" + NOT_MARKED + r"(?P<secret>[^\s" + _END + r"(\[<“«„]"
    r"(?:[^\s" + _END + r"]++|[" + _END + r"]++(?=[^\s" + _END + r"]))*+))"
)
_LINK = (
    r"(?P<link>[:=\uff1a]|[—–]|(?<=[ \t])-(?=[ \t])|"
    r"(?<=[ \t])(?:" + _alternation(_LINKS) + r")(?![\w])(?:[ \t]*[:=])?"
    r"|(?:'s|’s)(?![\w]))"
)
_AFTER = re.compile(
    _KEY + r"(?P<fill>(?:[ \t]++" + _WORD + r"){0,5}?)[ \t]*" + _LINK + r"[ \t]*"
    r"(?:(?:" + _alternation(_LEAD_INS) + r")[ \t]+)?"
    r"(?:(?:" + _alternation(_ADVERBS) + r")[ \t]+)?" + _VALUE,
    re.IGNORECASE,
)
_DIRECT = re.compile(_DIRECT_KEY + r"[ \t]++" + _VALUE, re.IGNORECASE)
_BEFORE = re.compile(
    r"(?<!\S)[(\"'`“«„]?" + NOT_MARKED + r"(?P<secret>[^\s\"'`”»“)]++)[)\"'`”»“]?"
    r"[ \t]+(?:" + _alternation(_BEFORE_LINKS) + r")[ \t]+"
    r"(?P<fill>(?:"
    + _WORD
    + r"[ \t]+){0,3}?)"
    + _KEY
    + r"(?=[.,;:!?…)\"'”»]*+(?:\s|$))",  # the key ends its word: no value starts inside it
    re.IGNORECASE,
)
_CLAUSE_END = re.compile(r"[ \t]*(?:[.,;!?…)\]\"'”»]|\r?\n|$|[—–-][ \t])")
_NEXT_WORD = re.compile(r"[ \t]+([\w'’\-]+)")
_NAME = re.compile(r"[^\W\d_]++(?:\.[^\W\d_]++)+")
_REFERENCE = re.compile(r"[$%<{/~\-]|\\|https?:|www\.|.*://", re.IGNORECASE)


def _is_symbol(value: str, i: int) -> bool:
    """A character that is no letter or digit, except a hyphen or apostrophe inside a word."""
    c = value[i]
    if c.isalnum() or unicodedata.category(c) == "Mn":
        return False
    inside = 0 < i < len(value) - 1 and value[i - 1].isalpha() and value[i + 1].isalpha()
    return not (c in "-'’" and inside)


def _prose_word(word: str) -> bool:
    low = word.lower()
    parts = [p for p in re.split(r"[-'’]", low) if p]
    return any(p in _PROSE or _PROSE_SHAPE.fullmatch(p) for p in [low, *parts])


def looks_like_value(
    value: str, *, strict: bool = False, clause_end: bool = True, pin: bool = False
) -> bool:
    """Whether `value`, in the place of a password's value, is one rather than a word of prose
    (the rule in this module's docstring). `strict`: the key means other things too, only a
    value with a digit or symbol counts; `clause_end`: nothing but punctuation or the line's
    end follows it; `pin`: the key is a PIN, 4 to 12 digits."""
    value = value.rstrip("!?")
    if len(value) > 2 and value[0] == value[-1] and value[0] in "*_~":
        value = value[1:-1]  # *emphasis* in chat markup
    if pin:
        return value.isdigit() and 4 <= len(value) <= 12
    if len(value) < 4 or _REFERENCE.match(value) or not any(c.isalnum() for c in value):
        return False
    if _NAME.fullmatch(value):
        return False  # a file or host name: `main.cf`, `example.org`
    if any(c.isdigit() for c in value) or any(_is_symbol(value, i) for i in range(len(value))):
        return True
    return not strict and clause_end and not _prose_word(value)


def _value(m: re.Match[str]) -> tuple[str, str]:
    for name in ("secret", "dq", "sq", "bq", "uq"):
        if name in m.re.groupindex and m.group(name) is not None:
            return name, m.group(name)
    raise AssertionError("a prose pattern always holds a value")  # pragma: no cover


def _compound(m: re.Match[str]) -> bool:
    """The key is a modifier: "password manager", "password length"."""
    after = _NEXT_WORD.match(m.string, m.end("key"))
    return after is not None and after.group(1).lower() in _COMPOUNDS


def _counts_something(m: re.Match[str], value: str) -> bool:
    after = _NEXT_WORD.match(m.string, m.end(_value(m)[0]))
    return value.rstrip("!?").isdigit() and after is not None and after.group(1).lower() in _UNITS


def _judge(m: re.Match[str], *, strict: bool, clause_end: bool) -> str | None:
    """The value test first (most matches fail it, cheaply), then the words around it."""
    name, value = _value(m)
    key = " ".join(m.group("key").lower().split())
    strict = strict or key in _STRICT
    if name != "secret":  # quoted: a passphrase may hold spaces
        if len(value) < 4 or (
            " " not in value.strip() and not looks_like_value(value, strict=strict)
        ):
            return None
    elif not looks_like_value(
        value, strict=strict, clause_end=clause_end, pin=key in _PINS
    ) or _counts_something(m, value):
        return None
    return None if _compound(m) else "password"


def _accept_after(m: re.Match[str]) -> str | None:
    spaced = m.string[m.end("link") : m.end("link") + 1].isspace()
    if m.group("link") in ":=\uff1a" and m.group("fill") and not spaced:
        return None  # `expired at 10:30:45`: a colon after filler is a label's, spaced
    if any(w.lower() in _NEGATIONS for w in m.group("fill").split()):
        return None
    name = _value(m)[0]
    clause_end = _CLAUSE_END.match(m.string, m.end(name)) is not None
    return _judge(m, strict=False, clause_end=clause_end)


def _accept_direct(m: re.Match[str]) -> str | None:
    return _judge(m, strict=True, clause_end=False)


def _accept_before(m: re.Match[str]) -> str | None:
    if any(w.lower() in _NEGATIONS for w in m.group("fill").split()):
        return None
    return _judge(m, strict=True, clause_end=False)


_NEEDLES = tuple(
    sorted({fold(k).lower().split()[-1] for k in _KEYS + _AMBIGUOUS_KEYS + _PIN_KEYS})
)

PROSE_RULES: tuple[Rule, ...] = (
    Rule("password", _AFTER, _accept_after, _NEEDLES),
    Rule("password", _DIRECT, _accept_direct, _NEEDLES),
    Rule("password", _BEFORE, _accept_before, _NEEDLES),
)
