{{ cookiecutter.license_header }}
"""{{ cookiecutter.camel }}: two-stage TTS, AR talker -> codec decoder (omnitts pattern two-stage)."""

{% set n = cookiecutter.name %}{% set c = cookiecutter.camel %}{% set entries = [("configuration_" ~ n, c ~ "Config"), (n ~ "_code2wav", c ~ "Code2Wav"), (n ~ "_talker", c ~ "TalkerForConditionalGeneration")] %}{% for module, cls in entries | sort %}from .{{ module }} import {{ cls }}
{% endfor %}
__all__ = [
    "{{ c }}Config",
    "{{ c }}TalkerForConditionalGeneration",
    "{{ c }}Code2Wav",
]
