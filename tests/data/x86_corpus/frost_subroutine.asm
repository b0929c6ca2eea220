section .data
    frost_count dd 0
    oslo db "Oslo", 0
    rome db "Rome", 0
section .text
global _start
_start:
    mov esi, oslo
    call check_city
    mov esi, rome
    call check_city
    push dword [frost_count]
    call report_count
    hlt

check_city:               ; esi = city name
    push esi
    call get_temperature
    cmp eax, 0
    jge .done
    inc dword [frost_count]
.done:
    ret
